package v1_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
)

// testClientset exercises the generated clientset, informers and listers
// against the real API server: create, status subresource, watch.
func testClientset(t *testing.T, client versioned.Interface, ns string) {
	ctx := t.Context()
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
	vmiInformer := factory.Kubevirt().V1().VirtualMachineInstances()
	lister := vmiInformer.Lister()
	informer := vmiInformer.Informer()
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}

	mem := resource.MustParse("128Mi")
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "typed", Labels: map[string]string{v1.NodeNameLabel: "node-a"}},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain:                        v1.DomainSpec{Memory: &v1.Memory{Guest: &mem}},
			TerminationGracePeriodSeconds: ptr.To[int64](5),
		},
	}
	created, err := client.KubevirtV1().VirtualMachineInstances(ns).Create(ctx, vmi, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}

	// The status subresource: a status update changes status, not spec.
	created.Status.Phase = v1.Scheduled
	created.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceReady, Status: corev1.ConditionFalse, Reason: v1.ReasonGuestNotRunning}}
	created.Spec.TerminationGracePeriodSeconds = ptr.To[int64](99)
	updated, err := client.KubevirtV1().VirtualMachineInstances(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if updated.Status.Phase != v1.Scheduled || *updated.Spec.TerminationGracePeriodSeconds != 5 {
		t.Fatalf("status update: phase %q, grace %d; want Scheduled, 5 (spec untouched)", updated.Status.Phase, *updated.Spec.TerminationGracePeriodSeconds)
	}

	// The informer sees the change; the lister serves it.
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		got, err := lister.VirtualMachineInstances(ns).Get("typed")
		if err == nil && got.Status.Phase == v1.Scheduled {
			return
		}
		select {
		case <-deadline.Done():
			t.Fatalf("lister never saw the Scheduled VMI: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
