package snapshot

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	snapshotv1 "github.com/nodevirt/nodevirt/cluster/api/snapshot/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// RestoreFinalizer keeps a restore until it released its target VM
// (KubeVirt's name).
const RestoreFinalizer = "snapshot.kubevirt.io/vmrestore-protection"

// RestoreGracePeriod is how long a WaitGracePeriod restore waits for its
// target to stop (KubeVirt's).
const RestoreGracePeriod = 5 * time.Minute

// RestoreAnnotation names the restore that made a claim.
const RestoreAnnotation = "restore.kubevirt.io/name"

// LastRestoreAnnotation on a VM names the last restore that wrote it, as
// <restore name>-<restore uid> (KubeVirt's restore.kubevirt.io/lastRestoreUID):
// a restore whose status write was lost knows on its next round that the
// target is already its work, and completes instead of treating the VM it
// created (and that may be running by then) as a target to stop.
const LastRestoreAnnotation = "restore.kubevirt.io/lastRestoreUID"

// restoreMark is r's value of LastRestoreAnnotation.
func restoreMark(r *snapshotv1.VirtualMachineRestore) string {
	return fmt.Sprintf("%s-%s", r.Name, r.UID)
}

// RestoredBy reports whether vm was written by restore r.
func RestoredBy(vm *v1.VirtualMachine, r *snapshotv1.VirtualMachineRestore) bool {
	return vm.Annotations[LastRestoreAnnotation] == restoreMark(r)
}

// RestoredClaimName is the name of the claim restored for volume by
// restore r: the override's restoreName, else restore-<restore uid>-<volume>
// (KubeVirt's RandomizeNames).
func RestoredClaimName(r *snapshotv1.VirtualMachineRestore, volume string) string {
	for _, o := range r.Spec.VolumeRestoreOverrides {
		if o.VolumeName == volume && o.RestoreName != "" {
			return o.RestoreName
		}
	}
	return fmt.Sprintf("restore-%s-%s", r.UID, volume)
}

// RestoredClaim is the claim restore r makes for backup b: the captured
// claim's spec (without its bound volume) from b's volume snapshot, at
// least the snapshot's restore size, with the override's labels and
// annotations. It is pure.
func RestoredClaim(r *snapshotv1.VirtualMachineRestore, b snapshotv1.VolumeBackup, vs *snapv1.VolumeSnapshot) *corev1.PersistentVolumeClaim {
	spec := *b.PersistentVolumeClaim.Spec.DeepCopy()
	spec.VolumeName = ""
	src := &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: *b.VolumeSnapshotName}
	spec.DataSource = src
	spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: src.APIGroup, Kind: src.Kind, Name: src.Name}
	if vs != nil && vs.Status != nil && vs.Status.RestoreSize != nil {
		if spec.Resources.Requests == nil {
			spec.Resources.Requests = corev1.ResourceList{}
		}
		if cur, ok := spec.Resources.Requests[corev1.ResourceStorage]; !ok || cur.Cmp(*vs.Status.RestoreSize) < 0 {
			spec.Resources.Requests[corev1.ResourceStorage] = vs.Status.RestoreSize.DeepCopy()
		}
	}
	labels := maps.Clone(b.PersistentVolumeClaim.Labels)
	annotations := maps.Clone(b.PersistentVolumeClaim.Annotations)
	for _, o := range r.Spec.VolumeRestoreOverrides {
		if o.VolumeName != b.VolumeName {
			continue
		}
		for k, v := range o.Labels {
			labels = setKey(labels, k, v)
		}
		for k, v := range o.Annotations {
			annotations = setKey(annotations, k, v)
		}
	}
	annotations = setKey(annotations, RestoreAnnotation, r.Name)
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: RestoredClaimName(r, b.VolumeName), Namespace: r.Namespace, Labels: labels, Annotations: annotations},
		Spec:       spec,
	}
}

// RestoredSpec is the VM spec restore r gives its target: the captured
// spec with each restored volume on its new claim, marked with
// LastRestoreAnnotation, the patches applied, and, for an existing
// target, the target's own run strategy (a restore does not start or stop
// a VM). It is pure.
func RestoredSpec(r *snapshotv1.VirtualMachineRestore, content *snapshotv1.VirtualMachineSnapshotContent, target *v1.VirtualMachine) (*v1.VirtualMachine, error) {
	src := content.Spec.Source.VirtualMachine
	if src == nil {
		return nil, fmt.Errorf("content %s holds no VirtualMachine", content.Name)
	}
	vm := &v1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Spec.Target.Name, Namespace: r.Namespace, Labels: maps.Clone(src.Labels), Annotations: maps.Clone(src.Annotations)},
		Spec:       *src.Spec.DeepCopy(),
	}
	if target != nil {
		vm.ObjectMeta = *target.ObjectMeta.DeepCopy()
		vm.Status = *target.Status.DeepCopy()
		vm.Spec.RunStrategy, vm.Spec.Running = target.Spec.RunStrategy, target.Spec.Running
	}
	vm.Annotations = setKey(vm.Annotations, LastRestoreAnnotation, restoreMark(r))
	restored := map[string]string{}
	for _, b := range content.Spec.VolumeBackups {
		restored[b.VolumeName] = RestoredClaimName(r, b.VolumeName)
	}
	if vm.Spec.Template != nil {
		for i, vol := range vm.Spec.Template.Spec.Volumes {
			if name, ok := restored[vol.Name]; ok && vol.PersistentVolumeClaim != nil {
				vm.Spec.Template.Spec.Volumes[i].PersistentVolumeClaim.ClaimName = name
			}
		}
	}
	if len(r.Spec.Patches) == 0 {
		return vm, nil
	}
	doc, err := json.Marshal(vm)
	if err != nil {
		return nil, err
	}
	ops := make([]json.RawMessage, 0, len(r.Spec.Patches))
	for i, p := range r.Spec.Patches {
		var op map[string]json.RawMessage
		if err := json.Unmarshal([]byte(p), &op); err != nil {
			return nil, fmt.Errorf("spec.patches[%d]: not a JSON patch operation: %w", i, err)
		}
		ops = append(ops, json.RawMessage(p))
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, fmt.Errorf("spec.patches: %w", err)
	}
	if doc, err = patch.Apply(doc); err != nil {
		return nil, fmt.Errorf("spec.patches: %w", err)
	}
	out := &v1.VirtualMachine{}
	if err := json.Unmarshal(doc, out); err != nil {
		return nil, fmt.Errorf("spec.patches: the patched VM: %w", err)
	}
	return out, nil
}

func setKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}
