package snapshot

import (
	"fmt"
	"slices"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/nodevirt/nodevirt/cluster/api/snapshot/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Finalizer keeps a snapshot until its guest is thawed and its content
// dealt with (KubeVirt's name).
const Finalizer = "snapshot.kubevirt.io/vmsnapshot-protection"

// DefaultFailureDeadline is how long a snapshot may stay in progress when
// spec.failureDeadline is unset (KubeVirt's default).
const DefaultFailureDeadline = 5 * time.Minute

// ContentName is the name of snapshot s's content (KubeVirt's).
func ContentName(s *snapshotv1.VirtualMachineSnapshot) string {
	return "vmsnapshot-content-" + string(s.UID)
}

// VolumeSnapshotName is the name of the CSI VolumeSnapshot of volume in
// snapshot s.
func VolumeSnapshotName(s *snapshotv1.VirtualMachineSnapshot, volume string) string {
	return fmt.Sprintf("vmsnapshot-%s-volume-%s", s.UID, volume)
}

// Deadline is when snapshot s fails if it is still in progress; zero when
// it has none (spec.failureDeadline 0).
func Deadline(s *snapshotv1.VirtualMachineSnapshot) time.Time {
	d := DefaultFailureDeadline
	if s.Spec.FailureDeadline != nil {
		d = s.Spec.FailureDeadline.Duration
	}
	if d <= 0 {
		return time.Time{}
	}
	return s.CreationTimestamp.Add(d)
}

// Claim is what the controller knows of a PVC volume's claim: the claim,
// and the VolumeSnapshotClass able to snapshot it ("" when none is, with
// Why saying why).
type Claim struct {
	PVC   *corev1.PersistentVolumeClaim
	Class string
	Why   string
}

// Volumes splits vm's volumes into those the snapshot includes (PVCs with
// a VolumeSnapshotClass) and the excluded ones, each with the reason.
// claims maps claim names to what is known of them (a claim missing
// from it does not exist). It is pure.
func Volumes(vm *v1.VirtualMachine, claims map[string]Claim) (included []string, excluded map[string]string) {
	excluded = map[string]string{}
	if vm.Spec.Template == nil {
		return nil, excluded
	}
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		switch {
		case vol.PersistentVolumeClaim == nil:
			excluded[vol.Name] = "not a PersistentVolumeClaim: its data is not kept"
		case claims[vol.PersistentVolumeClaim.ClaimName].PVC == nil:
			excluded[vol.Name] = fmt.Sprintf("claim %s does not exist", vol.PersistentVolumeClaim.ClaimName)
		case claims[vol.PersistentVolumeClaim.ClaimName].Class == "":
			excluded[vol.Name] = claims[vol.PersistentVolumeClaim.ClaimName].Why
		default:
			included = append(included, vol.Name)
		}
	}
	return included, excluded
}

// Content builds the content of snapshot s of vm: the VM as it is, and a
// volume backup (claim and volume snapshot name) per included volume. The
// content is owned by s unless its deletion policy is Retain. It is pure.
func Content(s *snapshotv1.VirtualMachineSnapshot, vm *v1.VirtualMachine, claims map[string]Claim, included []string) *snapshotv1.VirtualMachineSnapshotContent {
	c := &snapshotv1.VirtualMachineSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: ContentName(s), Namespace: s.Namespace},
		Spec: snapshotv1.VirtualMachineSnapshotContentSpec{
			VirtualMachineSnapshotName: ptr.To(s.Name),
			Source: snapshotv1.SourceSpec{VirtualMachine: &snapshotv1.VirtualMachine{
				ObjectMeta: metav1.ObjectMeta{
					Name: vm.Name, Namespace: vm.Namespace, UID: vm.UID, Generation: vm.Generation,
					Labels: vm.Labels, Annotations: vm.Annotations,
				},
				Spec:   *vm.Spec.DeepCopy(),
				Status: *vm.Status.DeepCopy(),
			}},
		},
	}
	if s.Spec.DeletionPolicy == nil || *s.Spec.DeletionPolicy != snapshotv1.ContentRetain {
		c.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(s, snapshotv1.SchemeGroupVersion.WithKind("VirtualMachineSnapshot"))}
	}
	claimOf := map[string]string{}
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		if vol.PersistentVolumeClaim != nil {
			claimOf[vol.Name] = vol.PersistentVolumeClaim.ClaimName
		}
	}
	for _, name := range included {
		pvc := claims[claimOf[name]].PVC
		c.Spec.VolumeBackups = append(c.Spec.VolumeBackups, snapshotv1.VolumeBackup{
			VolumeName: name,
			PersistentVolumeClaim: snapshotv1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: pvc.Name, Namespace: pvc.Namespace, Labels: pvc.Labels, Annotations: restorableAnnotations(pvc.Annotations)},
				Spec:       *pvc.Spec.DeepCopy(),
			},
			VolumeSnapshotName: ptr.To(VolumeSnapshotName(s, name)),
		})
	}
	return c
}

// restorableAnnotations drops the annotations the provisioning machinery
// writes on a bound claim: a restored claim must be provisioned anew.
func restorableAnnotations(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		switch k {
		case "pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller",
			"volume.beta.kubernetes.io/storage-provisioner", "volume.kubernetes.io/storage-provisioner",
			"volume.kubernetes.io/selected-node":
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// VolumeSnapshot is the CSI VolumeSnapshot of backup b of content c, in
// class, owned by c.
func VolumeSnapshot(c *snapshotv1.VirtualMachineSnapshotContent, b snapshotv1.VolumeBackup, class string) *snapv1.VolumeSnapshot {
	return &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name: *b.VolumeSnapshotName, Namespace: c.Namespace,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(c, snapshotv1.SchemeGroupVersion.WithKind("VirtualMachineSnapshotContent"))},
		},
		Spec: snapv1.VolumeSnapshotSpec{
			Source:                  snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(b.PersistentVolumeClaim.Name)},
			VolumeSnapshotClassName: ptr.To(class),
		},
	}
}

// Cut sums up the volume snapshots of a content: every one has been cut
// (has a creation time: the point in time it holds), the latest of those
// times, whether every one is ready to use, and the first error.
type Cut struct {
	All   bool
	Time  *metav1.Time
	Ready bool
	Err   string
}

// CutOf reads the observed volume snapshots (by name; a missing one is
// nil) of content c. It is pure.
func CutOf(c *snapshotv1.VirtualMachineSnapshotContent, observed map[string]*snapv1.VolumeSnapshot) (Cut, []snapshotv1.VolumeSnapshotStatus) {
	cut := Cut{All: true, Ready: true}
	var statuses []snapshotv1.VolumeSnapshotStatus
	for _, b := range c.Spec.VolumeBackups {
		vs := observed[*b.VolumeSnapshotName]
		st := snapshotv1.VolumeSnapshotStatus{VolumeSnapshotName: *b.VolumeSnapshotName}
		if vs == nil || vs.Status == nil {
			cut.All, cut.Ready = false, false
			statuses = append(statuses, st)
			continue
		}
		st.CreationTime, st.ReadyToUse = vs.Status.CreationTime, vs.Status.ReadyToUse
		if e := vs.Status.Error; e != nil && e.Message != nil {
			st.Error = &snapshotv1.Error{Time: e.Time, Message: e.Message}
			if cut.Err == "" {
				cut.Err = fmt.Sprintf("volume snapshot %s: %s", *b.VolumeSnapshotName, *e.Message)
			}
		}
		if vs.Status.CreationTime == nil {
			cut.All = false
		} else if cut.Time == nil || cut.Time.Before(vs.Status.CreationTime) {
			cut.Time = vs.Status.CreationTime
		}
		if vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse {
			cut.Ready = false
		}
		statuses = append(statuses, st)
	}
	return cut, statuses
}

// setCondition sets condition t on conds, keeping its transition time
// when the status does not change.
func setCondition(conds []snapshotv1.Condition, t snapshotv1.ConditionType, status corev1.ConditionStatus, reason, message string, now metav1.Time) []snapshotv1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			if conds[i].Status != status {
				conds[i].LastTransitionTime = now
			}
			conds[i].Status, conds[i].Reason, conds[i].Message = status, reason, message
			return conds
		}
	}
	return append(conds, snapshotv1.Condition{Type: t, Status: status, Reason: reason, Message: message, LastTransitionTime: now})
}

// hasIndication reports whether st records indication i.
func hasIndication(st *snapshotv1.VirtualMachineSnapshotStatus, i snapshotv1.Indication) bool {
	return slices.Contains(st.Indications, i)
}

// addIndication records indication i on st once.
func addIndication(st *snapshotv1.VirtualMachineSnapshotStatus, i snapshotv1.Indication) {
	if !hasIndication(st, i) {
		st.Indications = append(st.Indications, i)
	}
}
