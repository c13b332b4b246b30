package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Deployed is a single-node suite's cluster: it takes the cluster lock,
// reuses the running local cluster (after `make images`, which rebuilds
// and imports what changed) or starts one in NODEVIRT_E2E_CLUSTER_DIR
// (default <repo>/.cluster), and deploys nodevirt from this tree
// (hack/deploy-local.sh with RESTART=1, so re-imported images run).
// Cleanups release the lock and stop a cluster it started, unless
// NODEVIRT_E2E_KEEP=1. Progress goes to log.
func Deployed(t *testing.T, log io.Writer) *Cluster {
	t.Helper()
	return DeployedNodes(t, log, 1)
}

// DeployedNodes is Deployed for a suite that needs at least nodes nodes:
// a running cluster with fewer belongs to someone else, and the suite
// fails (testenv.Require) asking for it to be stopped first; a cluster it
// starts has that many nodes.
func DeployedNodes(t *testing.T, log io.Writer, nodes int) *Cluster {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	lockCtx, lockCancel := context.WithTimeout(context.Background(), LockWait)
	defer lockCancel()
	unlock, err := Lock(lockCtx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	dir := os.Getenv("NODEVIRT_E2E_CLUSTER_DIR")
	if dir == "" {
		dir = filepath.Join(root, ".cluster")
	}
	if marker, err := os.ReadFile("/run/nodevirt-cluster"); err == nil {
		dir = strings.TrimSpace(string(marker)) // one cluster per host: use the running one
	}
	c, err := Load(dir)
	switch {
	case err == nil:
		if len(c.Nodes) < nodes {
			testenv.Require(t, false, fmt.Sprintf("a local cluster with %d nodes (the one running in %s has %d)", nodes, dir, len(c.Nodes)),
				fmt.Sprintf("cluster-down; make cluster-up NODES=%d", nodes))
		}
		t.Logf("reusing the local cluster in %s (%d nodes)", dir, len(c.Nodes))
		if err := runIn(ctx, log, root, "make", "--no-print-directory", "images"); err != nil {
			t.Fatalf("make images: %v", err)
		}
	case errors.Is(err, ErrNotRunning):
		t.Logf("starting a local cluster in %s", dir)
		c, err = Up(ctx, Config{Dir: dir, Nodes: nodes, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		if os.Getenv("NODEVIRT_E2E_KEEP") != "1" {
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				if err := c.Down(ctx); err != nil {
					t.Errorf("cluster down: %v", err)
				}
			})
		}
	default:
		t.Fatal(err)
	}
	if err := Deploy(ctx, c, log, "RESTART=1"); err != nil {
		t.Fatal(err)
	}
	return c
}

// Deploy runs hack/deploy-local.sh on c with the environment plus env
// (e.g. "POD_SHAPE=Containers", "RESTART=1").
func Deploy(ctx context.Context, c *Cluster, log io.Writer, env ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "deploy-local.sh"))
	cmd.Env = append(append(os.Environ(), "CLUSTER_DIR="+c.Dir), env...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/deploy-local.sh %s: %w", strings.Join(env, " "), err)
	}
	return nil
}

// runIn runs a command in dir with its output going to w.
func runIn(ctx context.Context, w io.Writer, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = w, w
	return cmd.Run()
}
