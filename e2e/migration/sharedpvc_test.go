package migration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// csiClass is the local cluster's CSI StorageClass (hack/cluster/csi.sh).
const csiClass = "nodevirt-csi"

// Marks of the SharedPVC scenario: written by the guest at boot on the
// source (markOffset) and after the migration on the target (movedOffset).
const (
	fsClaimMark    = "NODEVIRT-PVC-FS"
	blockClaimMark = "NODEVIRT-PVC-BLOCK"
	movedMark      = "NODEVIRT-PVC-MOVED"
	movedOffset    = 4 << 20
)

// SharedPVC (19): a VM whose disks are ReadWriteMany claims of the local
// cluster's CSI driver, one Filesystem and one Block, is LiveMigratable and
// migrates without its disks being copied: the target pod mounts the same
// volumes and QEMU opens them with cache none. The guest on the target
// reads what it wrote on the source from the disks themselves, and what it
// writes on the target is on the volumes. A VM on a ReadWriteOnce claim
// stays LiveMigratable=False, with KubeVirt's reason naming the claim.
func testSharedPVC(t *testing.T, s *suite) {
	if err := s.cluster.Script(t.Context(), "csi.sh"); err != nil {
		t.Fatal(err)
	}
	const name = "shared"
	s.claim(t, name+"-fs", "Filesystem", "ReadWriteMany")
	s.claim(t, name+"-block", "Block", "ReadWriteMany")
	s.claim(t, "local-rwo", "Filesystem", "ReadWriteOnce")

	s.startVM(t, vmSpec{name: "local", claims: []string{"local-rwo"}})
	lm := s.waitLiveMigratable(t, "local", "False")
	if lm.Reason != "DisksNotLiveMigratable" || !strings.Contains(lm.Message, "local-rwo") {
		t.Errorf("VM on a ReadWriteOnce claim: LiveMigratable=False %q %q; want reason DisksNotLiveMigratable naming the claim", lm.Reason, lm.Message)
	}

	vmi := s.startVM(t, vmSpec{name: name, claims: []string{name + "-fs", name + "-block"},
		claimMarks: []string{fsClaimMark, blockClaimMark}})
	s.waitSerial(t, s.activePod(t, vmi.Metadata.UID, vmi.Status.NodeName), "NODEVIRT-DISKS-WRITTEN", time.Minute)
	s.checkVolumeStatus(t, name, map[string]string{"claim0": name + "-fs", "claim1": name + "-block"})
	s.waitLiveMigratable(t, name, "True")
	s.checkDirectCache(t, name, "claim0", "claim1")

	h := s.migrate(t, name)
	s.checkDirectCache(t, name, "claim0", "claim1")
	out := s.guestExec(t, h.to, name, "/bin/sh", "-c", readMarks(fsClaimMark, blockClaimMark))
	if got := strings.Fields(out); len(got) != 2 || got[0] != fsClaimMark || got[1] != blockClaimMark {
		t.Errorf("the guest on %s reads %q from its claims, want %s and %s", h.to, out, fsClaimMark, blockClaimMark)
	}
	write := fmt.Sprintf("for d in %s %s; do printf %s | dd of=$d bs=512 seek=%d conv=fsync 2>/dev/null; done; echo done",
		diskDev(0), diskDev(1), movedMark, movedOffset/512)
	if out := s.guestExec(t, h.to, name, "/bin/sh", "-c", write); !strings.Contains(out, "done") {
		t.Fatalf("guest write on %s: %q", h.to, out)
	}
	for _, c := range []struct{ claim, file, mark string }{
		{name + "-fs", "data/disk.img", fsClaimMark},
		{name + "-block", "disk.img", blockClaimMark},
	} {
		f := s.volumeFile(t, c.claim, c.file)
		checkAt(t, f, markOffset, c.mark)
		checkAt(t, f, movedOffset, movedMark)
	}
}

// claim creates a 64 MiB claim of the CSI class and waits until it is
// bound; it is deleted when the test ends.
func (s *suite) claim(t *testing.T, name, volumeMode, accessMode string) {
	t.Helper()
	s.kubectl(t, []byte(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %s}
spec:
  storageClassName: %s
  volumeMode: %s
  accessModes: [%s]
  resources: {requests: {storage: 64Mi}}
`, name, csiClass, volumeMode, accessMode)), "apply", "-n", namespace, "-f", "-")
	t.Cleanup(func() {
		if _, err := s.kubectlErr(nil, "delete", "-n", namespace, "pvc", name, "--ignore-not-found", "--wait=true", "--timeout=60s"); err != nil {
			t.Errorf("delete claim %s: %v", name, err)
		}
	})
	s.kubectl(t, nil, "wait", "-n", namespace, "pvc/"+name, "--for=jsonpath={.status.phase}=Bound", "--timeout=60s")
}

// volumeFile is file in claim's volume as the host has it: under the
// cluster's csi directory, named by the PV's volume handle.
func (s *suite) volumeFile(t *testing.T, claim, file string) string {
	t.Helper()
	pv := strings.TrimSpace(s.kubectl(t, nil, "get", "-n", namespace, "pvc", claim, "-o", "jsonpath={.spec.volumeName}"))
	handle := strings.TrimSpace(s.kubectl(t, nil, "get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeHandle}"))
	return filepath.Join(s.cluster.Dir, "csi", "volumes", handle, file)
}

// checkAt: file holds mark at offset.
func checkAt(t *testing.T, file string, offset int64, mark string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("the claim's disk on the host: %v", err)
	}
	defer f.Close()
	b := make([]byte, len(mark))
	if _, err := f.ReadAt(b, offset); err != nil || !bytes.Equal(b, []byte(mark)) {
		t.Errorf("%s holds %q at %d (%v), want %q", file, b, offset, err, mark)
	}
}

// waitLiveMigratable waits until VMI name's LiveMigratable condition has
// status and returns it.
func (s *suite) waitLiveMigratable(t *testing.T, name, status string) condition {
	t.Helper()
	var lm condition
	s.waitVMI(t, name, time.Minute, "LiveMigratable="+status, func(v *vmiView) bool {
		for _, c := range v.Status.Conditions {
			if c.Type == "LiveMigratable" {
				lm = c
				return c.Status == status
			}
		}
		return false
	})
	t.Logf("VMI %s: LiveMigratable=%s %s %s", name, status, lm.Reason, lm.Message)
	return lm
}

// checkVolumeStatus: VMI name's status.volumeStatus records each PVC
// volume's claim (volume -> claim) as ReadWriteMany.
func (s *suite) checkVolumeStatus(t *testing.T, name string, claims map[string]string) {
	t.Helper()
	raw := s.kubectl(t, nil, "get", "-n", namespace, "vmi", name, "-o", "jsonpath={.status.volumeStatus}")
	var got []struct {
		Name string `json:"name"`
		PVC  *struct {
			ClaimName   string   `json:"claimName"`
			AccessModes []string `json:"accessModes"`
		} `json:"persistentVolumeClaimInfo"`
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("VMI %s status.volumeStatus %q: %v", name, raw, err)
	}
	for volume, claim := range claims {
		found := false
		for _, v := range got {
			if v.Name == volume && v.PVC != nil && v.PVC.ClaimName == claim && strings.Contains(strings.Join(v.PVC.AccessModes, ","), "ReadWriteMany") {
				found = true
			}
		}
		if !found {
			t.Errorf("VMI %s status.volumeStatus %s: want volume %s of claim %s, ReadWriteMany", name, raw, volume, claim)
		}
	}
}

// checkDirectCache: the running QEMU of VMI name opens the disks of the
// named volumes with cache.direct (O_DIRECT), on both of their layers.
func (s *suite) checkDirectCache(t *testing.T, name string, volumes ...string) {
	t.Helper()
	procs := s.qemuProcs(name)
	if len(procs) != 1 {
		t.Fatalf("VMI %s: QEMU processes %+v, want one", name, procs)
	}
	args := cmdline(procs[0].pid)
	for _, vol := range volumes {
		direct := false
		for i := 1; i < len(args); i++ {
			if args[i-1] != "-blockdev" {
				continue
			}
			var node struct {
				Filename string `json:"filename"`
				Cache    struct {
					Direct bool `json:"direct"`
				} `json:"cache"`
			}
			if json.Unmarshal([]byte(args[i]), &node) == nil && strings.Contains(node.Filename, "/"+vol) {
				direct = node.Cache.Direct
			}
		}
		if !direct {
			t.Errorf("VMI %s on %s: the disk of volume %s is not opened with cache.direct (QEMU %v)", name, procs[0].node, vol, args)
		}
	}
}
