package vmi

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
)

// fixture seeds informer indexers and fake clientsets, sample-controller style.
type fixture struct {
	t          *testing.T
	vmis, pods cache.Indexer
	pvcs       cache.Indexer
	kvObjs     []runtime.Object
	kubeObjs   []runtime.Object
	kv         *fake.Clientset
	kube       *kubefake.Clientset
	ctl        *Controller
}

func newFixture(t *testing.T) *fixture {
	return &fixture{t: t,
		vmis: cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil),
		pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, PodIndexers()),
		pvcs: cache.NewIndexer(cache.MetaNamespaceKeyFunc, nil)}
}

func (f *fixture) addVMI(v *v1.VirtualMachineInstance) {
	_ = f.vmis.Add(v)
	f.kvObjs = append(f.kvObjs, v)
}
func (f *fixture) addPod(p *corev1.Pod) { _ = f.pods.Add(p); f.kubeObjs = append(f.kubeObjs, p) }

func (f *fixture) sync(key string) (kv, kube []string) {
	f.t.Helper()
	f.kv, f.kube = fake.NewSimpleClientset(f.kvObjs...), kubefake.NewSimpleClientset(f.kubeObjs...)
	if f.ctl == nil {
		f.ctl = New(Deps{
			VMIs: listers.NewVirtualMachineInstanceLister(f.vmis), Pods: f.pods, PVCs: corelisters.NewPersistentVolumeClaimLister(f.pvcs),
			PodAPI: f.kube.CoreV1(), Client: f.kv.KubevirtV1(), Recorder: record.NewFakeRecorder(10),
			Config: PodConfig{LauncherImage: "launcher:dev", Emulation: true}, Now: func() time.Time { return t0 },
		})
	} else {
		f.ctl.d.PodAPI, f.ctl.d.Client = f.kube.CoreV1(), f.kv.KubevirtV1()
	}
	if err := f.ctl.Sync(context.Background(), key); err != nil {
		f.t.Fatalf("Sync(%s): %v", key, err)
	}
	return writes(f.kv.Actions()), writes(f.kube.Actions())
}

// written is the VMI as the fake API server holds it after the sync.
func (f *fixture) written() *v1.VirtualMachineInstance {
	f.t.Helper()
	vmi, err := f.kv.KubevirtV1().VirtualMachineInstances("ns").Get(context.Background(), "testvm", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return vmi
}

func writes(as []core.Action) []string {
	var out []string
	for _, a := range as {
		switch a.GetVerb() {
		case "get", "list", "watch":
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return out
}

func TestSync_NewVMICreatesPodOnce(t *testing.T) {
	f := newFixture(t)
	f.addVMI(vmiIn(""))
	kv, kube := f.sync("ns/testvm")
	if diff := cmp.Diff([]string{"patch virtualmachineinstances/status"}, kv); diff != "" {
		t.Errorf("kubevirt actions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"create pods"}, kube); diff != "" {
		t.Errorf("kube actions (-want +got):\n%s", diff)
	}
	pod := f.kube.Actions()[0].(core.CreateAction).GetObject().(*corev1.Pod)
	if pod.Labels[v1.CreatedByLabel] != "1234-uid" || pod.Spec.Containers[0].Name != ComputeContainer {
		t.Errorf("unexpected pod %+v", pod.ObjectMeta)
	}
	// The informer has not shown the pod yet: no second pod.
	if _, kube := f.sync("ns/testvm"); len(kube) != 0 {
		t.Errorf("second sync wrote %v, want nothing (expectation pending)", kube)
	}
}

func TestSync_PodRunningSchedulesVMI(t *testing.T) {
	f := newFixture(t)
	f.addVMI(vmiIn(v1.Scheduling))
	f.addPod(podIn(corev1.PodRunning, "node1", func(p *corev1.Pod) { p.Annotations = map[string]string{v1.DomainAnnotation: "testvm"} }))
	kv, kube := f.sync("ns/testvm")
	if diff := cmp.Diff([]string{"update virtualmachineinstances", "patch virtualmachineinstances/status"}, kv); diff != "" {
		t.Errorf("kubevirt actions (-want +got):\n%s", diff)
	}
	if len(kube) != 0 {
		t.Errorf("kube actions = %v, want none", kube)
	}
	labelled := f.kv.Actions()[0].(core.UpdateAction).GetObject().(*v1.VirtualMachineInstance)
	if labelled.Labels[v1.NodeNameLabel] != "node1" {
		t.Errorf("labels = %v", labelled.Labels)
	}
	st := f.written().Status
	if st.Phase != v1.Scheduled || st.NodeName != "node1" {
		t.Errorf("status = %+v", st)
	}
}

func TestSync_StalePodsDeleted(t *testing.T) {
	f := newFixture(t)
	f.addPod(podIn(corev1.PodRunning, "node1", func(p *corev1.Pod) { p.Annotations = map[string]string{v1.DomainAnnotation: "testvm"} }))
	// The VMI is gone (its agent released it): its pod goes.
	if _, kube := f.sync("ns/testvm"); !cmp.Equal(kube, []string{"delete pods"}) {
		t.Errorf("kube actions = %v, want the pod deleted", kube)
	}
}

func TestSync_DeletedUnscheduledVMIReleased(t *testing.T) {
	f := newFixture(t)
	f.addVMI(vmiIn(v1.Scheduling, func(v *v1.VirtualMachineInstance) { v.DeletionTimestamp = ptr.To(v.CreationTimestamp) }))
	f.addPod(podIn(corev1.PodPending, "", func(p *corev1.Pod) { p.Annotations = map[string]string{v1.DomainAnnotation: "testvm"} }))
	kv, kube := f.sync("ns/testvm")
	if !cmp.Equal(kv, []string{"update virtualmachineinstances"}) || !cmp.Equal(kube, []string{"delete pods"}) {
		t.Errorf("actions = %v / %v, want finalizer removed and pod deleted", kv, kube)
	}
	if fs := f.kv.Actions()[0].(core.UpdateAction).GetObject().(*v1.VirtualMachineInstance).Finalizers; len(fs) != 0 {
		t.Errorf("finalizers = %v", fs)
	}
}

func TestSync_MissingPVCWaits(t *testing.T) {
	f := newFixture(t)
	f.addVMI(vmiIn(v1.Pending, func(v *v1.VirtualMachineInstance) {
		v.Spec.Volumes = []v1.Volume{{Name: "d", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}
	}))
	kv, kube := f.sync("ns/testvm")
	if len(kube) != 0 || !cmp.Equal(kv, []string{"patch virtualmachineinstances/status"}) {
		t.Errorf("actions = %v / %v", kv, kube)
	}
	st := f.written().Status
	if len(st.Conditions) != 1 || st.Conditions[0].Reason != ReasonPvcNotFound {
		t.Errorf("conditions = %+v", st.Conditions)
	}
}
