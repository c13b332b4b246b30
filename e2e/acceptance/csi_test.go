package acceptance

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// csiClass is the local cluster's CSI StorageClass and VolumeSnapshotClass
// (hack/cluster/csi.sh).
const csiClass = "nodevirt-csi"

// Issue 19: PVCs of a real CSI driver (the local cluster's, hack/csihostpath
// with the Kubernetes CSI provisioner and snapshotter). A dynamically
// provisioned Filesystem claim and a Block one each carry a guest's data
// across a VM restart; a CSI VolumeSnapshot of the Filesystem claim,
// restored into a new claim, boots a new VM that finds the first guest's
// data.
func testCSIStorage(t *testing.T, s *suite) {
	if err := s.cluster.Script(t.Context(), "csi.sh"); err != nil {
		t.Fatal(err)
	}
	t.Run("Filesystem", func(t *testing.T) {
		s.csiClaim(t, "csi-fs", "Filesystem", "")
		s.claimVMRestart(t, "csi-fs", "Filesystem")
		checkMarker(t, s.csiVolumeFile(t, "csi-fs", "data/disk.img"))

		// The VM is stopped (claimVMRestart leaves it running: halt it so
		// the snapshot is of a quiet disk), then snapshot → restore → boot.
		s.patchRunStrategy(t, "csi-fs", "Halted")
		s.waitVMIGone(t, "csi-fs", "", 2*time.Minute)
		start := time.Now()
		s.apply(t, []byte(fmt.Sprintf(`apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: csi-fs-snap, namespace: %s}
spec:
  volumeSnapshotClassName: %s
  source: {persistentVolumeClaimName: csi-fs}
`, namespace, csiClass)))
		t.Cleanup(func() {
			s.kubectl(t, nil, "delete", "-n", namespace, "volumesnapshot", "csi-fs-snap", "--ignore-not-found", "--wait=true", "--timeout=60s")
		})
		s.kubectl(t, nil, "wait", "-n", namespace, "volumesnapshot", "csi-fs-snap", "--for=jsonpath={.status.readyToUse}=true", "--timeout=60s")
		t.Logf("MEASURE CSI VolumeSnapshot of a 64 MiB claim ready %v after it was created", time.Since(start).Round(10*time.Millisecond))
		start = time.Now()
		s.csiClaim(t, "csi-fs-restored", "Filesystem", "  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: csi-fs-snap}\n")
		t.Logf("MEASURE claim restored from the snapshot Bound %v after it was created", time.Since(start).Round(10*time.Millisecond))
		_, got := s.claimVM(t, "csi-restored", "csi-fs-restored")
		if !strings.HasPrefix(got, "PVC-FOUND") {
			t.Errorf("a VM on the restored claim: guest said %q, want PVC-FOUND (the snapshot's data)", got)
		}
	})

	t.Run("Block", func(t *testing.T) {
		s.csiClaim(t, "csi-block", "Block", "")
		s.claimVMRestart(t, "csi-block", "Block")
		checkMarker(t, s.csiVolumeFile(t, "csi-block", "disk.img"))
	})
}

// checkMarker: file (a claim's disk on the host) starts with the guest's
// marker.
func checkMarker(t *testing.T, file string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatalf("the claim's disk on the host: %v", err)
	}
	defer f.Close()
	b := make([]byte, len(pvcMarker))
	if _, err := f.ReadAt(b, 0); err != nil || !bytes.Equal(b, []byte(pvcMarker)) {
		t.Errorf("%s starts with %q (%v), want the guest's marker", file, b, err)
	}
}

// csiClaim creates a ReadWriteOnce claim of the CSI class (64 MiB, or
// size), with source (a dataSource line, or "") and waits until it is
// bound; it is deleted when the test ends.
func (s *suite) csiClaim(t *testing.T, name, mode, source string, size ...string) {
	t.Helper()
	request := "64Mi"
	if len(size) > 0 {
		request = size[0]
	}
	s.apply(t, []byte(fmt.Sprintf(`apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %s, namespace: %s}
spec:
  storageClassName: %s
  volumeMode: %s
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: %s}}
%s`, name, namespace, csiClass, mode, request, source)))
	t.Cleanup(func() {
		s.kubectl(t, nil, "delete", "-n", namespace, "pvc", name, "--ignore-not-found", "--wait=true", "--timeout=60s")
	})
	s.kubectl(t, nil, "wait", "-n", namespace, "pvc", name, "--for=jsonpath={.status.phase}=Bound", "--timeout=60s")
}

// csiVolumeFile is file in claim name's volume on the host: the driver
// keeps it under the cluster's csi directory, named by the PV's volume
// handle.
func (s *suite) csiVolumeFile(t *testing.T, name, file string) string {
	t.Helper()
	pv := strings.TrimSpace(s.kubectl(t, nil, "get", "-n", namespace, "pvc", name, "-o", "jsonpath={.spec.volumeName}"))
	handle := strings.TrimSpace(s.kubectl(t, nil, "get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeHandle}"))
	return filepath.Join(s.cluster.Dir, "csi", "volumes", handle, file)
}
