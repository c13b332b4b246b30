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
// saying the VM must be stopped; the guest overwrites its marker, the VM
// is stopped, the restore completes, and the started VM finds the marker
// again: its disk is the claim restored from the snapshot. A restore
// to a VM that does not exist creates it, and its guest finds the marker
// too. The stopped VM is snapshotted offline. Deleting a snapshot
// (deletionPolicy Delete) deletes its content and volume snapshot.
func testVMSnapshot(t *testing.T, s *suite) {
	if err := s.cluster.Script(t.Context(), "csi.sh"); err != nil {
		t.Fatal(err)
	}
	const vm = "snap-vm"
	s.csiClaim(t, "snap-data", "Filesystem", "", "1Gi")
	vmi, got := s.claimVMWith(t, vm, "snap-data", withScratchDisk, freezeWatch)
	if !strings.HasPrefix(got, "PVC-WROTE") {
		t.Fatalf("guest said %q, want PVC-WROTE", got)
	}
	pod := s.launcherPod(t, vmi)
	s.waitSerial(t, pod, "NODEVIRT-FS-WATCHED", 60*time.Second)
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
	window := s.checkFrozenThawed(t, vm, vmi.Status.NodeName)
	t.Logf("MEASURE online snapshot: guest frozen -> thawed (the node agent's timeline) %v", window.Round(time.Millisecond))
	// The guest saw it: qemu-ga's fsfreeze hook ran with freeze, then thaw.
	s.waitSerial(t, pod, "NODEVIRT-FSFREEZE freeze", 10*time.Second)
	s.waitSerial(t, pod, "NODEVIRT-FSFREEZE thaw", 10*time.Second)
	if n := strings.Count(readFile(s.serialLog(t, pod)), "NODEVIRT-FSFREEZE"); n != 2 {
		t.Errorf("the guest's console shows %d fsfreeze hook runs, want 2 (freeze, thaw)", n)
	}

	// The node agent SIGKILLed while the guest is frozen: the next agent
	// thaws it by the deadline the freeze asked for.
	s.frozenThroughAgentKill(t, vmi, pod, 15*time.Second)
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
	// The guest overwrites its marker; then the VM is stopped.
	dev := strings.Fields(got)[1]
	if code, out := s.guestExec(t, vmi, 30*time.Second, "/bin/dd", "if=/dev/zero", "of="+dev, "bs=64", "count=1", "conv=fsync"); code != 0 {
		t.Fatalf("the guest overwriting its marker on %s: exit %d: %s", dev, code, out)
	}
	s.patchRunStrategy(t, vm, "Halted")
	s.waitVMIGone(t, vm, "", 2*time.Minute)
	checkNoMarker(t, s.csiVolumeFile(t, "snap-data", "data/disk.img"))
	stopped := time.Now()
	r := s.waitRestored(t, "restore-in-place")
	t.Logf("MEASURE restore of a 1 GiB claim: VM stopped -> restore complete %v", time.Since(stopped).Round(10*time.Millisecond))
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
	testenv.Eventually(t, 10*time.Second, "restored VM released (status.restoreInProgress gone)", func() error {
		vm, err := s.virt.KubevirtV1().VirtualMachines(namespace).Get(t.Context(), vm, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if vm.Status.RestoreInProgress != nil {
			return fmt.Errorf("restoreInProgress %q", *vm.Status.RestoreInProgress)
		}
		return nil
	})
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

// withScratchDisk adds a 16 MiB emptyDisk (the guest's ext4 scratch file
// system, freezeWatch) to a claimVM manifest.
func withScratchDisk(m string) string {
	m = strings.Replace(m, "          disks:\n", "          disks:\n          - name: scratch\n            disk: {bus: virtio}\n", 1)
	return strings.Replace(m, "      volumes:\n", "      volumes:\n      - name: scratch\n        emptyDisk: {capacity: 16Mi}\n", 1)
}

// freezeWatch (guest script, one line) puts an ext4 file system on the
// 16 MiB scratch disk (withScratchDisk): something qemu-ga freezes (the
// initramfs root cannot be), so that its fsfreeze hook runs.
const freezeWatch = `for _ in $(seq 1 100); do grep -q ext4 /proc/filesystems && break; sleep 0.1; done; ` +
	`sd=; for b in /sys/block/vd*; do [ "$(cat $b/size)" = 32768 ] && sd=/dev/${b##*/}; done; ` +
	`mke2fs -q "$sd" && mkdir -p /mnt/scratch && mount -t ext4 "$sd" /mnt/scratch && echo NODEVIRT-FS-WATCHED`

// frozenThroughAgentKill freezes vmi's guest through the subresource API
// (as `virtctl freeze --unfreeze-timeout`), SIGKILLs the node agent's host
// process while it is frozen, and checks that the guest is thawed (its
// fsfreeze hook's thaw on the console) by the deadline, give or take the
// new agent's start.
func (s *suite) frozenThroughAgentKill(t *testing.T, vmi *v1.VirtualMachineInstance, pod corev1.Pod, timeout time.Duration) {
	t.Helper()
	before := strings.Count(readFile(s.serialLog(t, pod)), "NODEVIRT-FSFREEZE thaw")
	path := fmt.Sprintf("/apis/subresources.kubevirt.io/v1/namespaces/%s/virtualmachineinstances/%s/freeze", namespace, vmi.Name)
	body := fmt.Sprintf(`{"unfreezeTimeout":%q}`, timeout.String())
	asked := time.Now()
	if err := s.kube.CoreV1().RESTClient().Put().AbsPath(path).Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(t.Context()).Error(); err != nil {
		t.Fatalf("freeze %s: %v", vmi.Name, err)
	}
	old := s.agentPod(t, vmi.Status.NodeName)
	sigkillAgent(t, old)
	killed := time.Since(asked)
	s.kubectl(t, nil, "delete", "pod", "-n", "nodevirt", old.Name, "--grace-period=0", "--force", "--wait=false")
	s.waitAgentReady(t, vmi.Status.NodeName, old.UID, 90*time.Second)
	testenv.Eventually(t, timeout+60*time.Second, "the guest thawed after the agent's SIGKILL", func() error {
		if n := strings.Count(readFile(s.serialLog(t, pod)), "NODEVIRT-FSFREEZE thaw"); n <= before {
			return fmt.Errorf("no thaw on the console yet (%v after the freeze)", time.Since(asked).Round(time.Second))
		}
		return nil
	})
	thawed := time.Since(asked)
	t.Logf("MEASURE frozen guest, agent SIGKILLed %v after the freeze (unfreezeTimeout %v): thawed %v after the freeze",
		killed.Round(time.Millisecond), timeout, thawed.Round(100*time.Millisecond))
	if thawed < timeout-time.Second {
		t.Errorf("thawed %v after a freeze with unfreezeTimeout %v: before its deadline, and nobody unfroze it", thawed, timeout)
	}
	if thawed > timeout+30*time.Second {
		t.Errorf("thawed %v after a freeze with unfreezeTimeout %v: long after its deadline", thawed, timeout)
	}
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

// checkNoMarker: file (a claim's disk on the host) no longer starts with
// the guest's marker.
func checkNoMarker(t *testing.T, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("the claim's disk on the host: %v", err)
	}
	defer f.Close()
	b := make([]byte, len(pvcMarker))
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if string(b) == pvcMarker {
		t.Errorf("%s still starts with the marker the guest overwrote", file)
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

// checkFrozenThawed: the node agent's timeline of VM vm (nodectl on its
// node) shows the snapshot's freeze and, after it, the thaw; the time
// between is the freeze window. It returns the window.
func (s *suite) checkFrozenThawed(t *testing.T, vm, node string) time.Duration {
	t.Helper()
	out, errOut, err := s.nodectl(t, node, "timeline", namespace+"/"+vm)
	if err != nil {
		t.Fatalf("nodectl timeline: %v\n%s", err, errOut)
	}
	var frozen, thawed time.Time
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, f[0])
		if err != nil {
			continue
		}
		switch f[2] {
		case "FreezeRequested":
			frozen, thawed = at, time.Time{}
		case "Thawed":
			if !frozen.IsZero() {
				thawed = at
			}
		}
	}
	if frozen.IsZero() || thawed.IsZero() {
		t.Errorf("VM %s's timeline on %s: no freeze followed by a thaw:\n%s", vm, node, out)
		return 0
	}
	return thawed.Sub(frozen)
}

// Issue 21: how a snapshot says it is not application-consistent, and a
// failed one. A VM whose guest agent was stopped is snapshotted
// crash-consistent (NoGuestAgent). A VM on a claim whose CSI snapshots fail
// (the local driver's refuseSnapshots class) fails with the CSI error and
// its guest is thawed.
func testSnapshotFailures(t *testing.T, s *suite) {
	if err := s.cluster.Script(t.Context(), "csi.sh"); err != nil {
		t.Fatal(err)
	}
	s.csiClaim(t, "noagent-data", "Filesystem", "")
	// qga.sh (init respawns it) becomes a sleep, then qemu-ga is stopped.
	noAgent := `printf '#!/bin/sh\nexec sleep 2147483647\n' >/etc/qga.sh; ` +
		`for i in $(seq 1 100); do pidof qemu-ga >/dev/null && break; sleep 0.1; done; killall qemu-ga && echo NODEVIRT-QGA-STOPPED`
	vmi, _ := s.claimVM(t, "snap-noagent", "noagent-data", noAgent)
	s.waitSerial(t, s.launcherPod(t, vmi), "NODEVIRT-QGA-STOPPED", 60*time.Second)
	s.waitVMI(t, "snap-noagent", 90*time.Second, "AgentConnected gone", func(v *v1.VirtualMachineInstance) bool {
		return condition(v, v1.VirtualMachineInstanceAgentConnected) != corev1.ConditionTrue
	})
	crash := s.takeSnapshot(t, "snap-noagent", "snap-noagent")
	if !slices.Contains(crash.Status.Indications, snapshotv1.IndicationNoGuestAgent) || slices.Contains(crash.Status.Indications, snapshotv1.IndicationGuestAgent) {
		t.Errorf("snapshot without a guest agent: indications %v, want Online and NoGuestAgent", crash.Status.Indications)
	}

	const class = "nodevirt-csi-refusing-snapshots"
	s.apply(t, []byte(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: `+class+`}
provisioner: hostpath.csi.nodevirt.local
parameters: {refuseSnapshots: "true"}
volumeBindingMode: Immediate
`))
	t.Cleanup(func() { s.kubectl(t, nil, "delete", "storageclass", class, "--ignore-not-found") })
	s.apply(t, []byte(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: refusing-data, namespace: %s}
spec:
  storageClassName: %s
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
`, namespace, class)))
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "pvc", "refusing-data", "--ignore-not-found", "--wait=true", "--timeout=60s")
	})
	vmi, _ = s.claimVM(t, "snap-refused", "refusing-data")
	s.waitVMI(t, "snap-refused", 60*time.Second, "AgentConnected", func(v *v1.VirtualMachineInstance) bool {
		return condition(v, v1.VirtualMachineInstanceAgentConnected) == corev1.ConditionTrue
	})
	api := s.virt.SnapshotV1beta1().VirtualMachineSnapshots(namespace)
	_, err := api.Create(t.Context(), &snapshotv1.VirtualMachineSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap-refused"},
		Spec: snapshotv1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{
			APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "snap-refused"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "vmsnapshot", "snap-refused", "--ignore-not-found", "--wait=true", "--timeout=60s")
	})
	began := time.Now()
	testenv.Eventually(t, 2*time.Minute, "snapshot snap-refused Failed", func() error {
		got, err := api.Get(t.Context(), "snap-refused", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.Status == nil || got.Status.Phase != snapshotv1.Failed {
			return fmt.Errorf("status %+v", got.Status)
		}
		if got.Status.Error == nil || !strings.Contains(ptr.Deref(got.Status.Error.Message, ""), "refuses snapshots") {
			t.Errorf("failed snapshot's error %+v, want the CSI driver's reason", got.Status.Error)
		}
		return nil
	})
	t.Logf("MEASURE snapshot whose CSI snapshot fails: created -> Failed %v", time.Since(began).Round(10*time.Millisecond))
	if window := s.checkFrozenThawed(t, "snap-refused", vmi.Status.NodeName); window > 0 {
		t.Logf("failed snapshot: guest frozen -> thawed %v", window.Round(time.Millisecond))
	}
}
