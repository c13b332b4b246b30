package replicaset

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
)

// newTestController seeds informer indexers and a fake clientset with rs
// and vmis (sample-controller's fixture).
func newTestController(t *testing.T, rs *v1.VirtualMachineInstanceReplicaSet, vmis ...*v1.VirtualMachineInstance) (*Controller, *fake.Clientset) {
	t.Helper()
	sets, vmiIdx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil), cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)
	objs := []runtime.Object{rs}
	if err := sets.Add(rs); err != nil {
		t.Fatal(err)
	}
	for _, v := range vmis {
		if err := vmiIdx.Add(v); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, v)
	}
	client := fake.NewSimpleClientset(objs...)
	c := New(Deps{
		ReplicaSets: listers.NewVirtualMachineInstanceReplicaSetLister(sets), VMIs: listers.NewVirtualMachineInstanceLister(vmiIdx),
		Client: client.KubevirtV1(), Recorder: record.NewFakeRecorder(100), Now: func() time.Time { return t0 },
	})
	return c, client
}

// writtenStatus is the status of the last replica set status update.
func writtenStatus(t *testing.T, client *fake.Clientset) v1.VirtualMachineInstanceReplicaSetStatus {
	t.Helper()
	for i := len(client.Actions()) - 1; i >= 0; i-- {
		if u, ok := client.Actions()[i].(core.UpdateAction); ok && u.GetSubresource() == "status" {
			return u.GetObject().(*v1.VirtualMachineInstanceReplicaSet).Status
		}
	}
	t.Fatal("no status update")
	return v1.VirtualMachineInstanceReplicaSetStatus{}
}

func TestSync_CreateFailureSetsReplicaFailure(t *testing.T) {
	c, client := newTestController(t, testRS(2))
	client.PrependReactor("create", "virtualmachineinstances", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "virtualmachineinstances"}, "", errors.New("quota exceeded"))
	})
	err := c.Sync(context.Background(), "ns/rs")
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Sync = %v, want the Forbidden create error", err)
	}
	s := writtenStatus(t, client)
	if len(s.Conditions) != 1 || s.Conditions[0].Type != v1.VirtualMachineInstanceReplicaSetReplicaFailure ||
		s.Conditions[0].Status != corev1.ConditionTrue || s.Conditions[0].Reason != EventFailedCreate {
		t.Errorf("conditions %+v, want ReplicaFailure True FailedCreate", s.Conditions)
	}
	// Both failed creates settled their expectations: the next sync scales again.
	if !c.expect.Settled("ns/rs") {
		t.Error("failed creates left expectations outstanding")
	}
}

func TestSync_SuccessClearsReplicaFailure(t *testing.T) {
	rs := testRS(1)
	rs.Status.Conditions = []v1.VirtualMachineInstanceReplicaSetCondition{{
		Type: v1.VirtualMachineInstanceReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: EventFailedCreate}}
	c, client := newTestController(t, rs)
	if err := c.Sync(context.Background(), "ns/rs"); err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, client); len(s.Conditions) != 0 {
		t.Errorf("conditions %+v, want none", s.Conditions)
	}
	// One create is outstanding until the informer shows the VMI.
	if c.expect.Settled("ns/rs") {
		t.Error("a create the informer has not shown yet: want unsettled")
	}
}

func TestSync_DeletesFailedAndCreatesSuccessor(t *testing.T) {
	c, client := newTestController(t, testRS(1), vmi("failed", v1.Failed, time.Hour))
	if err := c.Sync(context.Background(), "ns/rs"); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "virtualmachineinstances" {
			verbs = append(verbs, a.GetVerb())
		}
	}
	if len(verbs) != 2 || !(verbs[0] == "delete" && verbs[1] == "create") {
		t.Errorf("VMI actions %v, want [delete create]", verbs)
	}
}
