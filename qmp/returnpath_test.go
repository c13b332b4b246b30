package qmp_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/qmp"
)

// TestQEMU_ReturnPath shows why the agent sets the return-path capability
// at both ends (node/agent/migrationsource.go): the migration stream goes
// into a target that swallows every byte and never loads the state — what
// a target looks like when the agent piping its stream is SIGKILLed with
// the last bytes in flight. Without return-path the source calls the
// migration completed (the guest would be lost at both ends); with it the
// source waits for the target's answer, fails when the stream closes, and
// its guest runs on.
func TestQEMU_ReturnPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		returnPath bool
		want       string
	}{
		{"without", false, qmp.MigrationCompleted},
		{"with", true, qmp.MigrationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := startVM(t, vmConfig{})
			c := src.DialQMP(t)
			ctx := ctxT(t, 90*time.Second)
			sock := filepath.Join(src.dir, "blackhole.sock")
			ln, err := net.Listen("unix", sock)
			must(t, err)
			defer ln.Close()
			// The black hole: reads everything, answers nothing; closes
			// the stream once nothing came for a while (the source sent
			// all it had).
			swallowed := make(chan int64, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					swallowed <- 0
					return
				}
				defer conn.Close()
				var n int64
				buf := make([]byte, 1<<16)
				for {
					_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
					k, err := conn.Read(buf)
					n += int64(k)
					if err != nil {
						break
					}
				}
				swallowed <- n
			}()
			must(t, c.MigrateSetCapabilities(ctx,
				qmp.MigrationCapability{Capability: "events", State: true},
				qmp.MigrationCapability{Capability: "return-path", State: tc.returnPath}))
			must(t, c.Migrate(ctx, "unix:"+sock))
			n := <-swallowed
			got := waitMigrationEnd(ctx, t, c)
			t.Logf("the target swallowed %d bytes; source migration %s", n, got)
			if got != tc.want {
				t.Fatalf("source migration %s, want %s", got, tc.want)
			}
			if !tc.returnPath {
				return
			}
			// The failed migration gives the guest back to the source:
			// QEMU reports the migration failed a moment before it leaves
			// finish-migrate and resumes the guest.
			testenv.Eventually(t, 10*time.Second, "the source guest running again after the failed migration", func() error {
				st, err := c.QueryStatus(ctx)
				if err != nil {
					return err
				}
				if st.Status != "running" {
					return fmt.Errorf("run state %q", st.Status)
				}
				return nil
			})
		})
	}
}

// waitMigrationEnd polls c until its migration completed, failed or was
// cancelled, and returns that status.
func waitMigrationEnd(ctx context.Context, t *testing.T, c *qmp.Conn) string {
	t.Helper()
	for {
		mi, err := c.QueryMigrate(ctx)
		must(t, err)
		switch mi.Status {
		case qmp.MigrationCompleted, qmp.MigrationFailed, qmp.MigrationCancelled:
			return mi.Status
		}
		select {
		case <-ctx.Done():
			t.Fatalf("migration still %s", mi.Status)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
