package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// pvcMarker is what the guest writes at the start of its PVC disk.
const pvcMarker = "NODEVIRT-PVC-MARKER-1"

// pvcScript (one line of user-data) finds the PVC disk (the largest virtio
// disk: the other is the NoCloud ISO) and prints PVC-FOUND if it holds the
// marker, else writes the marker (fsync) and prints PVC-WROTE.
const pvcScript = `dev=; max=0; for b in /sys/block/vd*; do s=$(cat $b/size); [ "$s" -gt "$max" ] && { max=$s; dev=/dev/${b##*/}; }; done; ` +
	`m=$(dd if=$dev bs=64 count=1 2>/dev/null | tr -d '\000\n'); ` +
	`if [ "$m" = ` + pvcMarker + ` ]; then echo "PVC-FOUND $dev"; ` +
	`else echo ` + pvcMarker + ` | dd of=$dev conv=fsync 2>/dev/null && sync && echo "PVC-WROTE $dev"; fi`

// Issue 19: a VM whose disk is a PVC, in filesystem mode (disk.img created
// by the launcher in the volume) and in block mode (the device handed to
// QEMU), writes a marker; stopped and started again (a new pod), it finds
// it. The volumes are local PersistentVolumes (a directory and a loop
// device on the node) bound through a no-provisioner StorageClass: the
// local cluster has no CSI driver yet (docs/local-cluster.md).
func testPVCs(t *testing.T, s *suite) {
	_, err := exec.LookPath("losetup")
	testenv.Require(t, err == nil, "losetup (util-linux)", "cluster-packages")
	node := s.cluster.Nodes[0].Name
	const class = "nodevirt-e2e-local"
	s.apply(t, []byte(fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %s}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
`, class)))
	t.Cleanup(func() { s.kubectl(t, nil, "delete", "storageclass", class, "--ignore-not-found") })

	t.Run("Filesystem", func(t *testing.T) {
		dir := t.TempDir()
		s.pvcVMRestart(t, "pvc-fs", node, class, "Filesystem", "path: "+dir)
		img := filepath.Join(dir, "disk.img")
		fi, err := os.Stat(img)
		if err != nil {
			t.Fatalf("the launcher's disk.img: %v", err)
		}
		t.Logf("disk.img on the volume: %d bytes, owner uid %d", fi.Size(), ownerUID(fi))
	})
	t.Run("Block", func(t *testing.T) {
		backing := filepath.Join(t.TempDir(), "backing.img")
		err := os.WriteFile(backing, nil, 0o600)
		if err == nil {
			err = os.Truncate(backing, 64<<20)
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
		if err != nil {
			t.Fatalf("losetup: %v: %s", err, out)
		}
		loop := strings.TrimSpace(string(out))
		t.Cleanup(func() {
			if out, err := exec.Command("losetup", "--detach", loop).CombinedOutput(); err != nil {
				t.Errorf("losetup --detach %s: %v: %s", loop, err, out)
			}
		})
		s.pvcVMRestart(t, "pvc-block", node, class, "Block", "path: "+loop)
		b, err := os.ReadFile(backing)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), pvcMarker) {
			t.Errorf("the block device does not start with the guest's marker: %q", b[:32])
		}
	})
}

func ownerUID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// pvcVMRestart creates a local PV (source: the local volume's YAML) and a
// claim bound to it, then runs claimVMRestart on it; it deletes them at
// the end.
func (s *suite) pvcVMRestart(t *testing.T, name, node, class, mode, local string) {
	t.Helper()
	pv := "nodevirt-e2e-" + name
	s.apply(t, []byte(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s}
spec:
  capacity: {storage: 64Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: %[2]s
  volumeMode: %[3]s
  local: {%[4]s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [%[5]s]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %[6]s, namespace: %[7]s}
spec:
  storageClassName: %[2]s
  volumeMode: %[3]s
  volumeName: %[1]s
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
`, pv, class, mode, local, node, name, namespace)))
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "pvc", name, "--ignore-not-found", "--wait=true", "--timeout=60s")
		s.kubectl(t, nil, "delete", "pv", pv, "--ignore-not-found", "--wait=true", "--timeout=60s")
	})
	s.claimVMRestart(t, name, mode)
}

// claimVM creates VM name (runStrategy Always) with claim as its second
// disk and returns its VMI once the guest has reported on that disk: what
// it said, PVC-WROTE (a fresh disk: it wrote the marker) or PVC-FOUND (the
// marker was there). extra commands (shell, one line each) run after.
// The VM is deleted at the end of the test.
func (s *suite) claimVM(t *testing.T, name, claim string, extra ...string) (*v1.VirtualMachineInstance, string) {
	t.Helper()
	return s.claimVMWith(t, name, claim, nil, extra...)
}

// claimVMWith is claimVM with edit applied to the manifest (nil: none).
func (s *suite) claimVMWith(t *testing.T, name, claim string, edit func(string) string, extra ...string) (*v1.VirtualMachineInstance, string) {
	t.Helper()
	t.Cleanup(func() { s.deleteVM(t, name) })
	m := string(s.vmManifest(t, name, "Always", strings.Join(append([]string{pvcScript}, extra...), "; ")))
	m = strings.Replace(m, "          disks:\n", "          disks:\n          - name: data\n            disk: {bus: virtio}\n", 1)
	m = strings.Replace(m, "      volumes:\n", fmt.Sprintf("      volumes:\n      - name: data\n        persistentVolumeClaim: {claimName: %s}\n", claim), 1)
	if edit != nil {
		m = edit(m)
	}
	s.apply(t, []byte(m))
	vmi := s.waitVMI(t, name, 120*time.Second, "Running", phaseIs(v1.Running))
	return vmi, s.waitSerial(t, s.launcherPod(t, vmi), "PVC-", 120*time.Second)
}

// claimVMRestart runs a VM on claim name: the guest writes the marker; the
// VM is stopped (Halted) and started again (Always) and the new guest
// finds it.
func (s *suite) claimVMRestart(t *testing.T, name, mode string) {
	t.Helper()
	start := time.Now()
	vmi, got := s.claimVM(t, name, name)
	if !strings.HasPrefix(got, "PVC-WROTE") {
		t.Fatalf("first boot: guest said %q, want PVC-WROTE (a fresh disk)", got)
	}
	t.Logf("MEASURE %s (%s PVC): VM created -> guest wrote its marker %v", name, mode, time.Since(start).Round(100*time.Millisecond))

	s.patchRunStrategy(t, name, "Halted")
	s.waitVMIGone(t, name, "", 2*time.Minute)
	s.waitPodsGone(t, string(vmi.UID), 2*time.Minute)
	start = time.Now()
	s.patchRunStrategy(t, name, "Always")
	again := s.waitNewVMI(t, name, string(vmi.UID), 120*time.Second)
	again = s.waitVMI(t, name, 120*time.Second, "Running", func(v *v1.VirtualMachineInstance) bool {
		return v.UID == again.UID && v.Status.Phase == v1.Running
	})
	got = s.waitSerial(t, s.launcherPod(t, again), "PVC-", 120*time.Second)
	if !strings.HasPrefix(got, "PVC-FOUND") {
		t.Fatalf("after restart: guest said %q, want PVC-FOUND (the marker kept)", got)
	}
	t.Logf("MEASURE %s (%s PVC): VM started again -> guest found its marker %v", name, mode, time.Since(start).Round(100*time.Millisecond))
}
