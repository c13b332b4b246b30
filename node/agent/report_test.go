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

// A sync that starts again from the resourceVersion the agent last wrote
// its status over, and derives the same status, does not write it again:
// its informer cache is behind the write, and the write would conflict.
func TestReport_CacheBehindOwnWrite(t *testing.T) {
	o := obs(v1.Scheduled, withQEMU)
	o.VMI.ResourceVersion = "10"
	a := newTestAgent(t, o.VMI)
	ctx := context.Background()
	if err := a.deps.Store.Put(ctx, *o.Record); err != nil {
		t.Fatal(err)
	}
	a.domain(o.UID)
	patches := func() int {
		n := 0
		for _, act := range a.deps.Virt.(*virtfake.Clientset).Actions() {
			if act.GetVerb() == "patch" {
				n++
			}
		}
		return n
	}
	for range 2 {
		stale := obs(v1.Scheduled, withQEMU)
		stale.VMI.ResourceVersion = "10"
		if err := a.report(ctx, stale); err != nil {
			t.Fatal(err)
		}
	}
	if got := patches(); got != 1 {
		t.Errorf("%d status patches from the same stale VMI, want 1", got)
	}
	// A VMI the cache shows changed since is written to again.
	fresh := obs(v1.Scheduled, withQEMU)
	fresh.VMI.ResourceVersion = "11"
	if err := a.report(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got := patches(); got != 2 {
		t.Errorf("%d status patches after a newer VMI, want 2", got)
	}
}
