package snapshot

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/nodevirt/nodevirt/cluster/api/snapshot/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/fake"
	kvlisters "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	snaplisters "github.com/nodevirt/nodevirt/cluster/client/listers/snapshot/v1beta1"
)

func TestPickClass(t *testing.T) {
	class := func(name, driver string, def bool) snapv1.VolumeSnapshotClass {
		c := snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver}
		if def {
			c.Annotations = map[string]string{defaultClassAnnotation: "true"}
		}
		return c
	}
	for _, tt := range []struct {
		name    string
		classes []snapv1.VolumeSnapshotClass
		want    string
	}{
		{"the default of the driver", []snapv1.VolumeSnapshotClass{class("a", "d", false), class("b", "d", true), class("c", "other", true)}, "b"},
		{"the first by name", []snapv1.VolumeSnapshotClass{class("z", "d", false), class("m", "d", false)}, "m"},
		{"none of the driver", []snapv1.VolumeSnapshotClass{class("c", "other", true)}, ""},
	} {
		got, why, err := PickClass(tt.classes, "d", "sc")
		if err != nil || got != tt.want || (got == "") != (why != "") {
			t.Errorf("%s: PickClass = %q, %q, %v; want %q", tt.name, got, why, err, tt.want)
		}
	}
}

func TestDeadline(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}
	if got := Deadline(s); !got.Equal(created.Add(DefaultFailureDeadline)) {
		t.Errorf("default deadline %v", got)
	}
	s.Spec.FailureDeadline = &metav1.Duration{Duration: time.Minute}
	if got := Deadline(s); !got.Equal(created.Add(time.Minute)) {
		t.Errorf("1m deadline %v", got)
	}
	s.Spec.FailureDeadline = &metav1.Duration{}
	if got := Deadline(s); !got.IsZero() {
		t.Errorf("0 means none, got %v", got)
	}
}

// fakeCSI keeps volume snapshots in a map; every claim's class is "csi".
type fakeCSI struct {
	vs  map[string]*snapv1.VolumeSnapshot
	why string // when set, no class
}

func (f *fakeCSI) VolumeSnapshot(_ context.Context, _, name string) (*snapv1.VolumeSnapshot, error) {
	return f.vs[name], nil
}

func (f *fakeCSI) CreateVolumeSnapshot(_ context.Context, vs *snapv1.VolumeSnapshot) error {
	f.vs[vs.Name] = vs.DeepCopy()
	return nil
}

func (f *fakeCSI) ClassFor(context.Context, *corev1.PersistentVolumeClaim) (string, string, error) {
	if f.why != "" {
		return "", f.why, nil
	}
	return "csi", "", nil
}

// cut marks every volume snapshot cut (and ready, or failed).
func (f *fakeCSI) cut(at time.Time, ready bool, failure string) {
	for _, vs := range f.vs {
		vs.Status = &snapv1.VolumeSnapshotStatus{CreationTime: ptr.To(metav1.NewTime(at)), ReadyToUse: ptr.To(ready)}
		if failure != "" {
			vs.Status = &snapv1.VolumeSnapshotStatus{Error: &snapv1.VolumeSnapshotError{Message: ptr.To(failure)}}
		}
	}
}

type fakeFreezer struct {
	calls []string
	err   error
}

func (f *fakeFreezer) Freeze(_ context.Context, ns, name string, timeout time.Duration) error {
	f.calls = append(f.calls, fmt.Sprintf("freeze %s/%s", ns, name))
	return f.err
}

func (f *fakeFreezer) Unfreeze(_ context.Context, ns, name string) error {
	f.calls = append(f.calls, fmt.Sprintf("unfreeze %s/%s", ns, name))
	return nil
}

type fixture struct {
	t       *testing.T
	client  *fake.Clientset
	csi     *fakeCSI
	freezer *fakeFreezer
	stores  map[string]cache.Indexer
	now     time.Time
	ctl     *Controller
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	f := &fixture{t: t, client: fake.NewSimpleClientset(), csi: &fakeCSI{vs: map[string]*snapv1.VolumeSnapshot{}},
		freezer: &fakeFreezer{}, stores: map[string]cache.Indexer{}, now: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)}
	for _, k := range []string{"snap", "content", "vm", "vmi", "pvc"} {
		f.stores[k] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	for _, o := range objs {
		switch x := o.(type) {
		case *snapshotv1.VirtualMachineSnapshot:
			_ = f.client.Tracker().Add(x)
		case *v1.VirtualMachine:
			_ = f.stores["vm"].Add(x)
			_ = f.client.Tracker().Add(x)
		case *v1.VirtualMachineInstance:
			_ = f.stores["vmi"].Add(x)
		case *corev1.PersistentVolumeClaim:
			_ = f.stores["pvc"].Add(x)
		}
	}
	f.ctl = New(Deps{
		Snapshots: snaplisters.NewVirtualMachineSnapshotLister(f.stores["snap"]),
		Contents:  snaplisters.NewVirtualMachineSnapshotContentLister(f.stores["content"]),
		VMs:       kvlisters.NewVirtualMachineLister(f.stores["vm"]),
		VMIs:      kvlisters.NewVirtualMachineInstanceLister(f.stores["vmi"]),
		PVCs:      corelisters.NewPersistentVolumeClaimLister(f.stores["pvc"]),
		API:       f.client.SnapshotV1beta1(), VMAPI: f.client.KubevirtV1(), CSI: f.csi, Freezer: f.freezer,
		Recorder: record.NewFakeRecorder(100), Now: func() time.Time { return f.now },
	})
	return f
}

// sync copies the API's snapshots and contents into the caches, then
// syncs the snapshot.
func (f *fixture) sync() *snapshotv1.VirtualMachineSnapshot {
	f.t.Helper()
	ctx := context.Background()
	f.refresh()
	if err := f.ctl.Sync(ctx, "ns/snap"); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
	s, err := f.client.SnapshotV1beta1().VirtualMachineSnapshots("ns").Get(ctx, "snap", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func testObjects(running, agent bool) []runtime.Object {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	snap := &snapshotv1.VirtualMachineSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "ns", UID: "s-uid", CreationTimestamp: created},
		Spec:       snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "vm"}},
	}
	vm := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns", UID: "vm-uid"},
		Spec: v1.VirtualMachineSpec{Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
			Volumes: []v1.Volume{
				{Name: "root", ContainerDisk: &v1.ContainerDiskSource{Image: "img"}},
				{Name: "data", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data-claim"}},
			},
		}}}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-claim", Namespace: "ns",
		Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes", "keep": "me"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("sc")}}
	objs := []runtime.Object{snap, vm, pvc}
	if running {
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}}
		if agent {
			vmi.Status.Conditions = []v1.VirtualMachineInstanceCondition{{Type: v1.VirtualMachineInstanceAgentConnected, Status: corev1.ConditionTrue}}
		}
		objs = append(objs, vmi)
	}
	return objs
}

// TestSync_OnlineWithGuestAgent: the guest is frozen before the volume
// snapshot is created and thawed once it is cut, not before; the
// snapshot succeeds once the volume snapshot is ready.
func TestSync_OnlineWithGuestAgent(t *testing.T) {
	f := newFixture(t, testObjects(true, true)...)
	s := f.sync()
	if s.Status.Phase != snapshotv1.InProgress || !hasIndication(s.Status, snapshotv1.IndicationOnline) || !hasIndication(s.Status, snapshotv1.IndicationGuestAgent) {
		t.Fatalf("after the first sync: %+v", s.Status)
	}
	if got := s.Status.SnapshotVolumes; got == nil || len(got.IncludedVolumes) != 1 || got.IncludedVolumes[0] != "data" || len(got.ExcludedVolumes) != 1 || got.ExcludedVolumes[0] != "root" {
		t.Errorf("snapshotVolumes %+v; want data included, root excluded", got)
	}
	if len(f.freezer.calls) != 1 || f.freezer.calls[0] != "freeze ns/vm" {
		t.Fatalf("freezer calls %v; want one freeze", f.freezer.calls)
	}
	if got := f.vmHolder(); got != "snap" {
		t.Errorf("vm status.snapshotInProgress = %q, want snap", got)
	}
	vs := f.csi.vs[VolumeSnapshotName(s, "data")]
	if vs == nil || *vs.Spec.Source.PersistentVolumeClaimName != "data-claim" || *vs.Spec.VolumeSnapshotClassName != "csi" {
		t.Fatalf("volume snapshot %+v", vs)
	}
	content, err := f.client.SnapshotV1beta1().VirtualMachineSnapshotContents("ns").Get(context.Background(), ContentName(s), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := content.Spec.VolumeBackups; len(b) != 1 || b[0].PersistentVolumeClaim.Annotations["pv.kubernetes.io/bind-completed"] != "" || b[0].PersistentVolumeClaim.Annotations["keep"] != "me" {
		t.Errorf("volume backups %+v", b)
	}
	if len(content.OwnerReferences) != 1 || content.OwnerReferences[0].Name != "snap" {
		t.Errorf("content owners %+v; want the snapshot (deletionPolicy Delete)", content.OwnerReferences)
	}

	// Not cut yet: still frozen (renewed), nothing thawed.
	s = f.sync()
	if s.Status.CreationTime != nil || f.freezer.calls[len(f.freezer.calls)-1] != "freeze ns/vm" {
		t.Fatalf("before the cut: status %+v, freezer %v", s.Status, f.freezer.calls)
	}
	cutAt := f.now
	f.csi.cut(cutAt, false, "")
	s = f.sync()
	if s.Status.CreationTime == nil || !s.Status.CreationTime.Time.Equal(cutAt) || f.freezer.calls[len(f.freezer.calls)-1] != "unfreeze ns/vm" {
		t.Fatalf("after the cut: status %+v, freezer %v", s.Status, f.freezer.calls)
	}
	if s.Status.Phase != snapshotv1.InProgress || *s.Status.ReadyToUse {
		t.Errorf("cut but not ready: phase %s ready %v", s.Status.Phase, *s.Status.ReadyToUse)
	}
	f.csi.cut(cutAt, true, "")
	n := len(f.freezer.calls)
	s = f.sync()
	if s.Status.Phase != snapshotv1.Succeeded || !*s.Status.ReadyToUse || len(f.freezer.calls) != n {
		t.Errorf("ready: status %+v, freezer %v (no more calls wanted)", s.Status, f.freezer.calls)
	}
	if got := f.vmHolder(); got != "" {
		t.Errorf("vm status.snapshotInProgress = %q after the snapshot, want none", got)
	}
}

// vmHolder is the API's VM status.snapshotInProgress.
func (f *fixture) vmHolder() string {
	vm, err := f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return ptr.Deref(vm.Status.SnapshotInProgress, "")
}

// TestSync_WaitsForAnotherSnapshot: a VM another snapshot holds is not
// captured until it is released.
func TestSync_WaitsForAnotherSnapshot(t *testing.T) {
	objs := testObjects(false, false)
	objs[1].(*v1.VirtualMachine).Status.SnapshotInProgress = ptr.To("other")
	f := newFixture(t, objs...)
	s := f.sync()
	if s.Status.VirtualMachineSnapshotContentName != nil || len(f.csi.vs) != 0 {
		t.Errorf("captured while another snapshot holds the VM: %+v", s.Status)
	}
}

// TestSync_NoGuestAgent: a running guest without an agent is not frozen;
// the snapshot says so.
func TestSync_NoGuestAgent(t *testing.T) {
	f := newFixture(t, testObjects(true, false)...)
	s := f.sync()
	if !hasIndication(s.Status, snapshotv1.IndicationNoGuestAgent) || hasIndication(s.Status, snapshotv1.IndicationGuestAgent) || len(f.freezer.calls) != 0 {
		t.Errorf("indications %v, freezer %v", s.Status.Indications, f.freezer.calls)
	}
}

// TestSync_Offline: a stopped VM has no indications and is not frozen.
func TestSync_Offline(t *testing.T) {
	f := newFixture(t, testObjects(false, false)...)
	f.sync()
	f.csi.cut(f.now, true, "")
	s := f.sync()
	if len(s.Status.Indications) != 0 || len(f.freezer.calls) != 0 || s.Status.Phase != snapshotv1.Succeeded {
		t.Errorf("status %+v, freezer %v", s.Status, f.freezer.calls)
	}
}

// TestSync_VolumeSnapshotFails: the snapshot fails with the CSI error and
// the guest is thawed.
func TestSync_VolumeSnapshotFails(t *testing.T) {
	f := newFixture(t, testObjects(true, true)...)
	f.sync()
	f.csi.cut(f.now, false, "disk on fire")
	s := f.sync()
	if s.Status.Phase != snapshotv1.Failed || s.Status.Error == nil || *s.Status.Error.Message == "" {
		t.Fatalf("status %+v", s.Status)
	}
	if last := f.freezer.calls[len(f.freezer.calls)-1]; last != "unfreeze ns/vm" {
		t.Errorf("freezer %v; want the guest thawed last", f.freezer.calls)
	}
}

// TestSync_DeadlinePasses: past its failure deadline an uncut snapshot
// fails and its guest is thawed.
func TestSync_DeadlinePasses(t *testing.T) {
	f := newFixture(t, testObjects(true, true)...)
	f.sync()
	f.now = f.now.Add(DefaultFailureDeadline)
	s := f.sync()
	if s.Status.Phase != snapshotv1.Failed || f.freezer.calls[len(f.freezer.calls)-1] != "unfreeze ns/vm" {
		t.Errorf("status %+v, freezer %v", s.Status, f.freezer.calls)
	}
}

// TestSync_FreezeFails: the snapshot goes on crash-consistent.
func TestSync_FreezeFails(t *testing.T) {
	f := newFixture(t, testObjects(true, true)...)
	f.freezer.err = fmt.Errorf("agent gone")
	s := f.sync()
	if !hasIndication(s.Status, snapshotv1.IndicationQuiesceFailed) || hasIndication(s.Status, snapshotv1.IndicationGuestAgent) {
		t.Errorf("indications %v", s.Status.Indications)
	}
	if len(f.csi.vs) != 1 {
		t.Errorf("volume snapshots %v; want one created anyway", f.csi.vs)
	}
}

// TestSync_NoClass: a claim no VolumeSnapshotClass can snapshot is
// excluded, named with the reason.
func TestSync_NoClass(t *testing.T) {
	f := newFixture(t, testObjects(false, false)...)
	f.csi.why = "no VolumeSnapshotClass for driver x"
	s := f.sync()
	if got := s.Status.SnapshotVolumes; got == nil || len(got.IncludedVolumes) != 0 || len(got.ExcludedVolumes) != 2 {
		t.Errorf("snapshotVolumes %+v", got)
	}
	if s.Status.Phase != snapshotv1.Succeeded {
		t.Errorf("phase %s; want Succeeded (the VM's spec alone)", s.Status.Phase)
	}
}
