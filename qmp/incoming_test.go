package qmp_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/qmp"
)

// TestQEMU_IncomingHeldByS shows what the agent relies on when it starts
// every migration target with -S (node/launchspec/convert, Input.Incoming):
// the guest of a running source arrives paused and runs only when told
// (QMP cont), which the target agent does once the source reported the
// migration completed. Without -S the target QEMU resumes a guest that
// ran on the source the moment its state is loaded, before the source
// knows whether the switch-over succeeded: the guest could run at both
// ends.
//
// The source runs its guest during the transfer (pre-copy, the KVM mode);
// only the run states matter here, not the guest's memory (TCG's dirty
// tracking may lose pages of a running guest, docs/migration.md).
func TestQEMU_IncomingHeldByS(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // the target's run state once the migration completed
	}{
		{"WithS", []string{"-S"}, qmp.RunStatePaused},
		{"WithoutS", nil, qmp.RunStateRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := startVM(t, vmConfig{})
			dst := startVM(t, vmConfig{Incoming: "defer", Args: tc.args})
			sc, dc := src.DialQMP(t), dst.DialQMP(t)
			ctx := ctxT(t, 90*time.Second)
			uri := "unix:" + filepath.Join(dst.dir, "migrate.sock")
			must(t, dc.MigrateIncoming(ctx, uri))
			must(t, sc.MigrateSetCapabilities(ctx, qmp.MigrationCapability{Capability: "events", State: true}))
			bw := int64(10 << 30)
			must(t, sc.MigrateSetParameters(ctx, qmp.MigrationParameters{MaxBandwidth: &bw}))
			if st, err := sc.QueryStatus(ctx); err != nil || st.Status != qmp.RunStateRunning {
				t.Fatalf("source run state %+v, %v; want running", st, err)
			}
			must(t, sc.Migrate(ctx, uri))
			if got := waitMigrationEnd(ctx, t, sc); got != qmp.MigrationCompleted {
				t.Fatalf("migration %s", got)
			}
			var st qmp.StatusInfo
			for {
				var err error
				st, err = dc.QueryStatus(ctx)
				must(t, err)
				if st.Status != qmp.RunStateInMigrate {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatal("target still inmigrate")
				case <-time.After(20 * time.Millisecond):
				}
			}
			if st.Status != tc.want {
				t.Fatalf("target run state %q after the migration, want %q", st.Status, tc.want)
			}
			if tc.want != qmp.RunStatePaused {
				return
			}
			must(t, dc.Cont(ctx))
			st, err := dc.QueryStatus(ctx)
			must(t, err)
			if st.Status != qmp.RunStateRunning {
				t.Errorf("target run state %q after cont, want running", st.Status)
			}
		})
	}
}
