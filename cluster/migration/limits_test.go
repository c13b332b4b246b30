package migration

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestAdmit(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	self := slot{UID: "self", Name: "self", VMI: "ns/vm", Source: "a", Phase: v1.MigrationPending, Created: t0}
	other := func(name, vmi, source string, p v1.VirtualMachineInstanceMigrationPhase, created time.Time) slot {
		return slot{UID: name, Name: name, VMI: vmi, Source: source, Phase: p, Created: created}
	}
	tests := []struct {
		name    string
		others  []slot
		cluster uint32
		node    uint32
		want    string // substring; "" = admitted
	}{
		{"alone", []slot{self}, 5, 2, ""},
		{"same vmi active", []slot{other("x", "ns/vm", "a", v1.MigrationRunning, t0)}, 5, 2, "x of the VMI is in progress"},
		{"same vmi older pending goes first", []slot{other("x", "ns/vm", "a", v1.MigrationPending, t0.Add(-time.Second))}, 5, 2, "x of the VMI is waiting first"},
		{"same vmi newer pending waits behind", []slot{other("x", "ns/vm", "a", v1.MigrationPending, t0.Add(time.Second))}, 5, 2, ""},
		{"same vmi ended", []slot{other("x", "ns/vm", "a", v1.MigrationFailed, t0)}, 5, 2, ""},
		{"cluster full", []slot{other("x", "ns/o", "c", v1.MigrationScheduling, t0)}, 1, 2, "parallelMigrationsPerCluster 1"},
		{"node full", []slot{other("x", "ns/o", "a", v1.MigrationRunning, t0), other("y", "ns/p", "a", v1.MigrationTargetReady, t0)}, 5, 2, "parallelOutboundMigrationsPerNode 2"},
		{"other node busy", []slot{other("x", "ns/o", "c", v1.MigrationRunning, t0), other("y", "ns/p", "c", v1.MigrationRunning, t0)}, 5, 2, ""},
		{"pending others hold no slot", []slot{other("x", "ns/o", "a", v1.MigrationPending, t0)}, 1, 1, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := admit(self, tc.others, tc.cluster, tc.node)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("admit = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	m := WithDefaults(v1.MigrationConfiguration{})
	if *m.ParallelMigrationsPerCluster != 5 || *m.ParallelOutboundMigrationsPerNode != 2 || *m.CompletionTimeoutPerGiB != 150 ||
		*m.ProgressTimeout != 150 || !m.BandwidthPerMigration.IsZero() || *m.AllowAutoConverge || *m.AllowPostCopy {
		t.Errorf("defaults = %+v", m)
	}
}
