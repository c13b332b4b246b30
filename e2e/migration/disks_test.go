package migration

import (
	"strings"
	"testing"
	"time"
)

// Disks (17): a VM with node-local disks — a containerDisk (its overlay)
// and an emptyDisk — is LiveMigratable and migrates: what the guest wrote
// on them on the source is on the target's fresh disks, read back from the
// disks themselves (page cache dropped) after the migration.
func testDisks(t *testing.T, s *suite) {
	const name = "disks"
	vmi := s.startVM(t, vmSpec{name: name, disks: true})
	s.waitSerial(t, s.activePod(t, vmi.Metadata.UID, vmi.Status.NodeName), "NODEVIRT-DISKS-WRITTEN", time.Minute)
	s.waitLiveMigratable(t, name, "True")
	h := s.migrate(t, name)
	out := s.guestExec(t, h.to, name, "/bin/sh", "-c", readMarks(containerDiskMark, emptyDiskMark))
	got := strings.Fields(out)
	if len(got) != 2 || got[0] != containerDiskMark || got[1] != emptyDiskMark {
		t.Errorf("the guest on %s reads %q from its disks, want %s and %s: the disks did not move with it",
			h.to, out, containerDiskMark, emptyDiskMark)
	}
}
