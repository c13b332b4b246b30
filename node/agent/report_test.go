package agent

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	virtfake "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
	"github.com/nodevirt/nodevirt/store"
)

// newTestAgent returns an agent on fake clientsets seeded with objs and a
// real store in a temp dir.
func newTestAgent(t *testing.T, vmis ...*v1.VirtualMachineInstance) *Agent {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "agent.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	virt := virtfake.NewSimpleClientset()
	for _, v := range vmis {
		if _, err := virt.KubevirtV1().VirtualMachineInstances(v.Namespace).Create(context.Background(), v, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.NodeName = "node1"
	a, err := New(cfg, Deps{Kube: kubefake.NewSimpleClientset(), Virt: virt, Store: db})
	if err != nil {
		t.Fatal(err)
	}
	a.now = func() time.Time { return now }
	return a
}

func TestReport_CrashRecordsFailedPhase(t *testing.T) {
	o := obs(v1.Running, withQEMU, exited(false))
	a := newTestAgent(t, o.VMI)
	ctx := context.Background()
	if err := a.deps.Store.Put(ctx, *o.Record); err != nil {
		t.Fatal(err)
	}
	if err := a.report(ctx, o); err != nil {
		t.Fatal(err)
	}
	got, err := a.deps.Virt.KubevirtV1().VirtualMachineInstances("ns").Get(ctx, "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.Failed {
		t.Errorf("VMI phase = %q, want Failed", got.Status.Phase)
	}
	rec, err := a.deps.Store.Get(ctx, "u1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Observed.Phase != string(v1.Failed) {
		t.Errorf("record phase = %q, want Failed", rec.Observed.Phase)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
