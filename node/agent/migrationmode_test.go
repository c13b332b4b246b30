package agent

import (
	"testing"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/qmp"
)

func TestTransferMode(t *testing.T) {
	if got := transferMode(qmp.KVMInfo{Enabled: true, Present: true}); got != v1.MigrationPreCopy {
		t.Errorf("KVM: mode %q, want PreCopy", got)
	}
	if got := transferMode(qmp.KVMInfo{}); got != v1.MigrationPaused {
		t.Errorf("TCG: mode %q, want Paused", got)
	}
}

func TestStopsGuest(t *testing.T) {
	tests := []struct {
		name       string
		mode       v1.MigrationMode
		userPaused bool
		runState   string
		want       bool
	}{
		{"PausedTransferOfARunningGuest", v1.MigrationPaused, false, qmp.RunStateRunning, true},
		{"PreCopyNeverStops", v1.MigrationPreCopy, false, qmp.RunStateRunning, false},
		{"UserPausedStaysAsItIs", v1.MigrationPaused, true, qmp.RunStatePaused, false},
		// QEMU's state, not the observation's: a fresh agent's observation
		// predates its attach and has no run state.
		{"NotRunning", v1.MigrationPaused, false, qmp.RunStatePaused, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := stopsGuest(tt.mode, tt.userPaused, tt.runState); got != tt.want {
				t.Errorf("stopsGuest = %v, want %v", got, tt.want)
			}
		})
	}
}
