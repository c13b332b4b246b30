package snapshot

import (
	"context"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/nodevirt/nodevirt/cluster/api/snapshot/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	snaplisters "github.com/nodevirt/nodevirt/cluster/client/listers/snapshot/v1beta1"
)

func TestRestoredClaim(t *testing.T) {
	r := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "r-uid"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{VolumeRestoreOverrides: []snapshotv1.VolumeRestoreOverride{
			{VolumeName: "named", RestoreName: "my-claim", Labels: map[string]string{"l": "v"}}}}}
	b := snapshotv1.VolumeBackup{VolumeName: "data", VolumeSnapshotName: ptr.To("vs"),
		PersistentVolumeClaim: snapshotv1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "orig", Labels: map[string]string{"app": "x"}},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1", StorageClassName: ptr.To("sc"),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}},
		}}
	vs := &snapv1.VolumeSnapshot{Status: &snapv1.VolumeSnapshotStatus{RestoreSize: ptr.To(resource.MustParse("128Mi"))}}
	pvc := RestoredClaim(r, b, vs)
	if pvc.Name != "restore-r-uid-data" || pvc.Spec.VolumeName != "" || pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Name != "vs" ||
		pvc.Spec.DataSourceRef == nil || pvc.Annotations[RestoreAnnotation] != "r" || pvc.Labels["app"] != "x" {
		t.Errorf("restored claim %+v", pvc)
	}
	if got := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; got.Cmp(resource.MustParse("128Mi")) != 0 {
		t.Errorf("request %s, want the snapshot's restore size 128Mi", got.String())
	}
	b.VolumeName = "named"
	if pvc := RestoredClaim(r, b, nil); pvc.Name != "my-claim" || pvc.Labels["l"] != "v" {
		t.Errorf("override: %s %v", pvc.Name, pvc.Labels)
	}
}

func TestRestoredSpec(t *testing.T) {
	r := &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", UID: "r-uid"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{Target: corev1.TypedLocalObjectReference{Name: "copy"}}}
	content := &snapshotv1.VirtualMachineSnapshotContent{Spec: snapshotv1.VirtualMachineSnapshotContentSpec{
		Source: snapshotv1.SourceSpec{VirtualMachine: &snapshotv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: "vm", Labels: map[string]string{"app": "x"}},
			Spec: v1.VirtualMachineSpec{RunStrategy: ptr.To(v1.RunStrategyAlways), Template: &v1.VirtualMachineInstanceTemplateSpec{
				Spec: v1.VirtualMachineInstanceSpec{Volumes: []v1.Volume{
					{Name: "data", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "orig"}},
					{Name: "other", PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "unsnapshotted"}},
				}}}}}},
		VolumeBackups: []snapshotv1.VolumeBackup{{VolumeName: "data", VolumeSnapshotName: ptr.To("vs")}},
	}}
	vm, err := RestoredSpec(r, content, nil)
	if err != nil {
		t.Fatal(err)
	}
	vols := vm.Spec.Template.Spec.Volumes
	if vm.Name != "copy" || vm.Labels["app"] != "x" || vols[0].PersistentVolumeClaim.ClaimName != "restore-r-uid-data" || vols[1].PersistentVolumeClaim.ClaimName != "unsnapshotted" {
		t.Errorf("new VM %s %v volumes %+v", vm.Name, vm.Labels, vols)
	}
	if got := vm.Annotations[LastRestoreAnnotation]; got != "r-r-uid" {
		t.Errorf("new VM annotated %s=%q, want r-r-uid", LastRestoreAnnotation, got)
	}
	target := &v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "copy", ResourceVersion: "7"}, Spec: v1.VirtualMachineSpec{RunStrategy: ptr.To(v1.RunStrategyHalted)}}
	if vm, err = RestoredSpec(r, content, target); err != nil || *vm.Spec.RunStrategy != v1.RunStrategyHalted || vm.ResourceVersion != "7" {
		t.Errorf("existing target: %v, run strategy %v, resourceVersion %q", err, vm.Spec.RunStrategy, vm.ResourceVersion)
	}
	r.Spec.Patches = []string{`{"op":"add","path":"/metadata/labels/restored","value":"yes"}`}
	if vm, err = RestoredSpec(r, content, nil); err != nil || vm.Labels["restored"] != "yes" {
		t.Errorf("patched: %v %v", err, vm.Labels)
	}
	r.Spec.Patches = []string{`not json`}
	if _, err = RestoredSpec(r, content, nil); err == nil || !strings.Contains(err.Error(), "spec.patches[0]") {
		t.Errorf("bad patch: %v, want an error naming spec.patches[0]", err)
	}
}

type restoreFixture struct {
	*fixture
	kube     *kubefake.Clientset
	restores cache.Indexer
	rc       *Restorer
}

// newRestoreFixture: the snapshot fixture with a succeeded snapshot of the
// VM (its content and volume snapshot), and restore r.
func newRestoreFixture(t *testing.T, running bool, r *snapshotv1.VirtualMachineRestore) *restoreFixture {
	f := newFixture(t, testObjects(running, false)...)
	f.sync()
	f.csi.cut(f.now, true, "")
	f.sync()
	rf := &restoreFixture{fixture: f, kube: kubefake.NewSimpleClientset(),
		restores: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})}
	r.Namespace, r.UID = "ns", "r-uid"
	r.CreationTimestamp = metav1.NewTime(f.now)
	_ = f.client.Tracker().Add(r)
	d := f.ctl.d
	rf.rc = NewRestorer(d, RestoreDeps{Restores: snaplisters.NewVirtualMachineRestoreLister(rf.restores), PVCAPI: rf.kube.CoreV1()})
	return rf
}

func (f *restoreFixture) syncRestore(name string) *snapshotv1.VirtualMachineRestore {
	f.t.Helper()
	ctx := context.Background()
	list, _ := f.client.SnapshotV1beta1().VirtualMachineRestores("ns").List(ctx, metav1.ListOptions{})
	for i := range list.Items {
		_ = f.restores.Update(&list.Items[i])
	}
	f.refresh()
	if err := f.rc.Sync(ctx, "ns/"+name); err != nil {
		f.t.Fatalf("Sync: %v", err)
	}
	r, err := f.client.SnapshotV1beta1().VirtualMachineRestores("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// refresh copies the API's snapshots, contents and VMs into the caches.
func (f *fixture) refresh() {
	ctx := context.Background()
	snaps, _ := f.client.SnapshotV1beta1().VirtualMachineSnapshots("ns").List(ctx, metav1.ListOptions{})
	for i := range snaps.Items {
		_ = f.stores["snap"].Update(&snaps.Items[i])
	}
	contents, _ := f.client.SnapshotV1beta1().VirtualMachineSnapshotContents("ns").List(ctx, metav1.ListOptions{})
	for i := range contents.Items {
		_ = f.stores["content"].Update(&contents.Items[i])
	}
	vms, _ := f.client.KubevirtV1().VirtualMachines("ns").List(ctx, metav1.ListOptions{})
	for i := range vms.Items {
		_ = f.stores["vm"].Update(&vms.Items[i])
	}
}

func restoreOf(target string, policy *snapshotv1.TargetReadinessPolicy) *snapshotv1.VirtualMachineRestore {
	return &snapshotv1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec: snapshotv1.VirtualMachineRestoreSpec{VirtualMachineSnapshotName: "snap", TargetReadinessPolicy: policy,
			Target: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: target}}}
}

func conditionOf(r *snapshotv1.VirtualMachineRestore, t snapshotv1.ConditionType) snapshotv1.Condition {
	for _, c := range r.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return snapshotv1.Condition{}
}

// TestRestore_StoppedTarget: the claim is restored from the volume
// snapshot, owned by the VM, the VM's volume points at it, the restore is
// complete and the VM released.
func TestRestore_StoppedTarget(t *testing.T) {
	f := newRestoreFixture(t, false, restoreOf("vm", nil))
	r := f.syncRestore("r")
	if r.Status.Complete == nil || !*r.Status.Complete || len(r.Status.Restores) != 1 {
		t.Fatalf("status %+v", r.Status)
	}
	pvc, err := f.kube.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), r.Status.Restores[0].PersistentVolumeClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pvc.Spec.DataSource == nil || pvc.Spec.DataSource.Kind != "VolumeSnapshot" || len(pvc.OwnerReferences) != 1 || pvc.OwnerReferences[0].Name != "vm" {
		t.Errorf("claim %+v", pvc)
	}
	vm, _ := f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if got := vm.Spec.Template.Spec.Volumes[1].PersistentVolumeClaim.ClaimName; got != pvc.Name {
		t.Errorf("VM volume data on claim %s, want %s", got, pvc.Name)
	}
	f.syncRestore("r")
	vm, _ = f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if vm.Status.RestoreInProgress != nil {
		t.Errorf("restoreInProgress %q after completion", *vm.Status.RestoreInProgress)
	}
}

// TestRestore_RunningTarget: by default a restore waits, saying why;
// FailImmediate fails at once; after the grace period the default fails.
func TestRestore_RunningTarget(t *testing.T) {
	f := newRestoreFixture(t, true, restoreOf("vm", nil))
	r := f.syncRestore("r")
	c := conditionOf(r, snapshotv1.ConditionReady)
	if ptr.Deref(r.Status.Complete, false) || c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "must be stopped") {
		t.Fatalf("waiting: complete %v, Ready %+v", r.Status.Complete, c)
	}
	vm, _ := f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "vm", metav1.GetOptions{})
	if ptr.Deref(vm.Status.RestoreInProgress, "") != "r" {
		t.Errorf("the target is not held while waiting")
	}
	f.now = f.now.Add(RestoreGracePeriod)
	r = f.syncRestore("r")
	if conditionOf(r, snapshotv1.ConditionFailure).Status != corev1.ConditionTrue {
		t.Errorf("after the grace period: %+v", r.Status.Conditions)
	}

	f = newRestoreFixture(t, true, restoreOf("vm", ptr.To(snapshotv1.FailImmediate)))
	r = f.syncRestore("r")
	if c := conditionOf(r, snapshotv1.ConditionFailure); c.Status != corev1.ConditionTrue || !strings.Contains(c.Message, "must be stopped") {
		t.Errorf("FailImmediate: %+v", r.Status.Conditions)
	}
}

// TestRestore_NewVM: a target that does not exist is created from the
// snapshot, on the restored claim, which it then owns.
func TestRestore_NewVM(t *testing.T) {
	f := newRestoreFixture(t, false, restoreOf("copy", nil))
	r := f.syncRestore("r")
	if !ptr.Deref(r.Status.Complete, false) {
		t.Fatalf("status %+v", r.Status)
	}
	vm, err := f.client.KubevirtV1().VirtualMachines("ns").Get(context.Background(), "copy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := vm.Spec.Template.Spec.Volumes[1].PersistentVolumeClaim.ClaimName
	pvc, err := f.kube.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil || len(pvc.OwnerReferences) != 1 || pvc.OwnerReferences[0].Name != "copy" {
		t.Errorf("claim %s of the new VM: %v %+v", claim, err, pvc)
	}
}

// TestRestore_WaitsForSnapshot: a snapshot not ready yet is waited for.
func TestRestore_WaitsForSnapshot(t *testing.T) {
	f := newRestoreFixture(t, false, restoreOf("vm", nil))
	_ = f.client.Tracker().Delete(snapshotv1.SchemeGroupVersion.WithResource("virtualmachinesnapshots"), "ns", "snap")
	_ = f.stores["snap"].Delete(&snapshotv1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "snap"}})
	r := f.syncRestore("r")
	if ptr.Deref(r.Status.Complete, false) || !strings.Contains(conditionOf(r, snapshotv1.ConditionReady).Message, "does not exist") {
		t.Errorf("status %+v", r.Status)
	}
}

// TestRestore_StatusLost: a restore whose status write was lost after it
// created its VM (which then started) completes on its next round; it
// does not wait for the VM it made to stop. The same for an existing
// target it already wrote.
func TestRestore_StatusLost(t *testing.T) {
	for _, target := range []string{"copy", "vm"} {
		f := newRestoreFixture(t, false, restoreOf(target, nil))
		r := f.syncRestore("r")
		if !ptr.Deref(r.Status.Complete, false) {
			t.Fatalf("%s: status %+v", target, r.Status)
		}
		r.Status = nil
		if _, err := f.client.SnapshotV1beta1().VirtualMachineRestores("ns").UpdateStatus(context.Background(), r, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		_ = f.stores["vmi"].Add(&v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: target, Namespace: "ns"}, Status: v1.VirtualMachineInstanceStatus{Phase: v1.Running}})
		r = f.syncRestore("r")
		if !ptr.Deref(r.Status.Complete, false) {
			t.Errorf("%s: after the lost status write: complete %v, conditions %+v", target, r.Status.Complete, r.Status.Conditions)
		}
	}
}

// TestRestore_StaleCache: a restore whose status write was lost, synced
// again before the cache has the VM it created, finds that VM by its
// create's AlreadyExists and completes.
func TestRestore_StaleCache(t *testing.T) {
	f := newRestoreFixture(t, false, restoreOf("copy", nil))
	r := f.syncRestore("r")
	r.Status = nil
	r, err := f.client.SnapshotV1beta1().VirtualMachineRestores("ns").UpdateStatus(context.Background(), r, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = f.restores.Update(r)
	_ = f.stores["vm"].Delete(&v1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "copy"}})
	if err := f.rc.Sync(context.Background(), "ns/r"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	r, _ = f.client.SnapshotV1beta1().VirtualMachineRestores("ns").Get(context.Background(), "r", metav1.GetOptions{})
	if !ptr.Deref(r.Status.Complete, false) {
		t.Errorf("complete %v, conditions %+v", r.Status.Complete, r.Status.Conditions)
	}
}
