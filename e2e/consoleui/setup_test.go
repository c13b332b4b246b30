package consoleui

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// env is the cluster the test runs on and its admin client.
type env struct {
	root    string
	out     string
	cluster *localcluster.Cluster
	virt    versioned.Interface
}

// setUp takes the cluster lock, reuses or starts the local cluster and
// deploys nodevirt from this tree (as e2e/acceptance does); cleanups undo
// what it started.
func setUp(t *testing.T) *env {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := localcluster.OutDir()
	if err != nil {
		t.Fatal(err)
	}
	lockCtx, lockCancel := context.WithTimeout(context.Background(), localcluster.LockWait)
	defer lockCancel()
	unlock, err := localcluster.Lock(lockCtx)
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
	log := testenv.LogWriter(t)
	c, err := localcluster.Load(dir)
	switch {
	case err == nil:
		t.Logf("reusing the local cluster in %s", dir)
		if err := run(ctx, log, root, "make", "--no-print-directory", "images"); err != nil {
			t.Fatalf("make images: %v", err)
		}
	case errors.Is(err, localcluster.ErrNotRunning):
		t.Logf("starting a local cluster in %s", dir)
		c, err = localcluster.Up(ctx, localcluster.Config{Dir: dir, Log: log})
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
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "deploy-local.sh"))
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+c.Dir, "RESTART=1")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/deploy-local.sh: %v", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return &env{root: root, out: out, cluster: c, virt: versioned.NewForConfigOrDie(rc)}
}

func run(ctx context.Context, log interface{ Write([]byte) (int, error) }, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	return cmd.Run()
}

// kubectl runs the cluster's kubectl as admin with stdin (may be empty)
// and fails t on error.
func (e *env) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var in *strings.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	var out []byte
	var err error
	if in != nil {
		out, err = e.cluster.Kubectl(ctx, in, args...)
	} else {
		out, err = e.cluster.Kubectl(ctx, nil, args...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
