package acceptance

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	snapshotv1 "github.com/nodevirt/nodevirt/cluster/api/snapshot/v1beta1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Issue 21: VM snapshots and restores on the local cluster's CSI driver.
// A running VM whose guest wrote a marker on its PVC disk is snapshotted
// online (guest agent connected: the guest is frozen while the volume
// snapshot is cut, and thawed after). A restore of the running VM waits,
// saying the VM must be stopped; once it is stopped (and the marker on
// its claim overwritten) the restore completes, and the started VM finds
// the marker: its disk is the claim restored from the snapshot. A restore
// to a VM that does not exist creates it, and its guest finds the marker
// too. The stopped VM is snapshotted offline. Deleting a snapshot
// (deletionPolicy Delete) deletes its content and volume snapshot.
func testVMSnapshot(t *testing.T, s *suite) {
	if err := s.cluster.Script(t.Context(), "csi.sh"); err != nil {
		t.Fatal(err)
	}
	const vm = "snap-vm"
	s.csiClaim(t, "snap-data", "Filesystem", "")
	vmi, got := s.claimVM(t, vm, "snap-data")
	if !strings.HasPrefix(got, "PVC-WROTE") {
		t.Fatalf("guest said %q, want PVC-WROTE", got)
	}
	s.waitVMI(t, vm, 60*time.Second, "AgentConnected", func(v *v1.VirtualMachineInstance) bool {
		return condition(v, v1.VirtualMachineInstanceAgentConnected) == corev1.ConditionTrue
	})

	online := s.takeSnapshot(t, "snap-online", vm)
	for _, want := range []snapshotv1.Indication{snapshotv1.IndicationOnline, snapshotv1.IndicationGuestAgent} {
		if !slices.Contains(online.Status.Indications, want) {
			t.Errorf("online snapshot: indications %v, want %s", online.Status.Indications, want)
		}
	}
	if v := online.Status.SnapshotVolumes; v == nil || !slices.Equal(v.IncludedVolumes, []string{"data"}) || !slices.Contains(v.ExcludedVolumes, "cloudinit") {
		t.Errorf("online snapshot: snapshotVolumes %+v, want data included and cloudinit excluded", v)
	}
	s.checkFrozenThawed(t, online)
	if v := s.waitVMI(t, vm, 10*time.Second, "still Running", phaseIs(v1.Running)); v.UID != vmi.UID {
		t.Errorf("the VMI was replaced during the snapshot")
	}
	content, err := s.virt.SnapshotV1beta1().VirtualMachineSnapshotContents(namespace).Get(t.Context(), *online.Status.VirtualMachineSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(content.Spec.VolumeBackups) != 1 || content.Spec.Source.VirtualMachine == nil || content.Spec.Source.VirtualMachine.Name != vm {
		t.Fatalf("content %s: source %+v, volume backups %+v", content.Name, content.Spec.Source.VirtualMachine, content.Spec.VolumeBackups)
	}
	vs := *content.Spec.VolumeBackups[0].VolumeSnapshotName

	// A restore of the running VM waits for it to stop.
	s.createRestore(t, "restore-in-place", vm, "snap-online")
	restores := s.virt.SnapshotV1beta1().VirtualMachineRestores(namespace)
	testenv.Eventually(t, 20*time.Second, "restore-in-place waiting for the VM to stop", func() error {
		r, err := restores.Get(t.Context(), "restore-in-place", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r.Status == nil || ptr.Deref(r.Status.Complete, false) || !strings.Contains(restoreCondition(r, snapshotv1.ConditionReady).Message, "must be stopped") {
			return fmt.Errorf("restore status %+v", r.Status)
		}
		t.Logf("restore of the running VM: Ready=False %q", restoreCondition(r, snapshotv1.ConditionReady).Message)
		return nil
	})
	s.patchRunStrategy(t, vm, "Halted")
	s.waitVMIGone(t, vm, "", 2*time.Minute)
	overwriteMarker(t, s.csiVolumeFile(t, "snap-data", "data/disk.img"))
	stopped := time.Now()
	r := s.waitRestored(t, "restore-in-place")
	t.Logf("MEASURE restore of a 64 MiB claim: VM stopped -> restore complete %v", time.Since(stopped).Round(10*time.Millisecond))
	if len(r.Status.Restores) != 1 {
		t.Fatalf("restores %+v", r.Status.Restores)
	}
	restored, err := s.virt.KubevirtV1().VirtualMachines(namespace).Get(t.Context(), vm, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimOf(restored, "data"); got != r.Status.Restores[0].PersistentVolumeClaimName {
		t.Errorf("restored VM's volume data is on claim %q, want the restored %q", got, r.Status.Restores[0].PersistentVolumeClaimName)
	}
	if restored.Status.RestoreInProgress != nil {
		t.Errorf("restored VM: restoreInProgress %q after the restore", *restored.Status.RestoreInProgress)
	}
	s.patchRunStrategy(t, vm, "Always")
	again := s.waitVMI(t, vm, 120*time.Second, "Running", phaseIs(v1.Running))
	if got := s.waitSerial(t, s.launcherPod(t, again), "PVC-", 120*time.Second); !strings.HasPrefix(got, "PVC-FOUND") {
		t.Errorf("the restored VM's guest said %q, want PVC-FOUND (the snapshot's data, not the overwritten claim's)", got)
	}

	// A restore to a VM that does not exist creates it.
	t.Cleanup(func() { s.deleteVM(t, "snap-clone") })
	s.createRestore(t, "restore-clone", "snap-clone", "snap-online")
	s.waitRestored(t, "restore-clone")
	clone := s.waitVMI(t, "snap-clone", 120*time.Second, "Running", phaseIs(v1.Running))
	if got := s.waitSerial(t, s.launcherPod(t, clone), "PVC-", 120*time.Second); !strings.HasPrefix(got, "PVC-FOUND") {
		t.Errorf("the new VM restored from %s: guest said %q, want PVC-FOUND", vs, got)
	}

	// Offline: the stopped VM.
	s.patchRunStrategy(t, vm, "Halted")
	s.waitVMIGone(t, vm, "", 2*time.Minute)
	offline := s.takeSnapshot(t, "snap-offline", vm)
	if len(offline.Status.Indications) != 0 {
		t.Errorf("offline snapshot: indications %v, want none", offline.Status.Indications)
	}

	// Deletion takes the content and the volume snapshot with it.
	began := time.Now()
	s.kubectl(t, nil, "delete", "-n", namespace, "vmsnapshot", "snap-online", "--wait=true", "--timeout=60s")
	testenv.Eventually(t, 60*time.Second, "content and volume snapshot of snap-online gone", func() error {
		_, err := s.virt.SnapshotV1beta1().VirtualMachineSnapshotContents(namespace).Get(t.Context(), content.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("content %s: %v", content.Name, err)
		}
		if out := s.kubectl(t, nil, "get", "-n", namespace, "volumesnapshot", "--ignore-not-found", vs); strings.TrimSpace(out) != "" {
			return fmt.Errorf("volume snapshot %s still there", vs)
		}
		return nil
	})
	t.Logf("MEASURE snapshot deleted -> content and volume snapshot gone %v", time.Since(began).Round(10*time.Millisecond))
}

// createRestore creates restore name of snapshot onto VM target; it is
// deleted when the test ends.
func (s *suite) createRestore(t *testing.T, name, target, snapshot string) {
	t.Helper()
	_, err := s.virt.SnapshotV1beta1().VirtualMachineRestores(namespace).Create(t.Context(), &snapshotv1.VirtualMachineRestore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapshotv1.VirtualMachineRestoreSpec{VirtualMachineSnapshotName: snapshot,
			Target: corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: target}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create restore %s: %v", name, err)
	}
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "vmrestore", name, "--ignore-not-found", "--wait=true", "--timeout=60s")
	})
}

// waitRestored waits until restore name is complete.
func (s *suite) waitRestored(t *testing.T, name string) *snapshotv1.VirtualMachineRestore {
	t.Helper()
	var r *snapshotv1.VirtualMachineRestore
	testenv.Eventually(t, 2*time.Minute, "restore "+name+" complete", func() error {
		got, err := s.virt.SnapshotV1beta1().VirtualMachineRestores(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status == nil || !ptr.Deref(got.Status.Complete, false) {
			return fmt.Errorf("restore %s: status %+v", name, got.Status)
		}
		r = got
		return nil
	})
	return r
}

func restoreCondition(r *snapshotv1.VirtualMachineRestore, t snapshotv1.ConditionType) snapshotv1.Condition {
	for _, c := range r.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return snapshotv1.Condition{}
}

// claimOf is the claim of vm's PVC volume named volume.
func claimOf(vm *v1.VirtualMachine, volume string) string {
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.Name == volume && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ClaimName
		}
	}
	return ""
}

// overwriteMarker zeroes the guest's marker at the start of file (a
// claim's disk on the host), as a guest changing its data would.
func overwriteMarker(t *testing.T, file string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("the claim's disk on the host: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, 64), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// takeSnapshot creates snapshot name of VM vm and waits until it
// succeeded; it is deleted when the test ends.
func (s *suite) takeSnapshot(t *testing.T, name, vm string) *snapshotv1.VirtualMachineSnapshot {
	t.Helper()
	api := s.virt.SnapshotV1beta1().VirtualMachineSnapshots(namespace)
	began := time.Now()
	_, err := api.Create(t.Context(), &snapshotv1.VirtualMachineSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{
			APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: vm}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create snapshot %s: %v", name, err)
	}
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "vmsnapshot", name, "--ignore-not-found", "--wait=true", "--timeout=60s")
	})
	var snap *snapshotv1.VirtualMachineSnapshot
	testenv.Eventually(t, 2*time.Minute, "snapshot "+name+" Succeeded", func() error {
		got, err := api.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status == nil || got.Status.Phase != snapshotv1.Succeeded || got.Status.ReadyToUse == nil || !*got.Status.ReadyToUse {
			return fmt.Errorf("snapshot %s: status %+v", name, got.Status)
		}
		snap = got
		return nil
	})
	t.Logf("MEASURE snapshot %s of VM %s created -> Succeeded and ready %v (indications %v)", name, vm,
		time.Since(began).Round(10*time.Millisecond), snap.Status.Indications)
	return snap
}

// checkFrozenThawed: the snapshot's events say the guest was frozen,
// then thawed; the time between is the freeze window.
func (s *suite) checkFrozenThawed(t *testing.T, snap *snapshotv1.VirtualMachineSnapshot) {
	t.Helper()
	evs, err := s.kube.CoreV1().Events(namespace).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(snap.UID)})
	if err != nil {
		t.Fatal(err)
	}
	var frozen, thawed time.Time
	for _, e := range evs.Items {
		at := e.EventTime.Time
		if at.IsZero() {
			at = e.FirstTimestamp.Time
		}
		switch e.Reason {
		case "GuestFrozen":
			frozen = at
		case "GuestThawed":
			thawed = at
		}
	}
	if frozen.IsZero() || thawed.IsZero() || thawed.Before(frozen) {
		t.Errorf("snapshot %s events: frozen at %v, thawed at %v; want a freeze, then a thaw", snap.Name, frozen, thawed)
		return
	}
	t.Logf("MEASURE online snapshot: guest frozen -> thawed (events, 1 s resolution) %v", thawed.Sub(frozen))
}
