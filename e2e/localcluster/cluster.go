package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// ErrNotRunning means the state directory holds no running cluster.
var ErrNotRunning = errors.New("local cluster not running")

// Config says where and how to start a cluster.
type Config struct {
	Dir   string    // state directory (CLUSTER_DIR); required
	Nodes int       // number of nodes; 0 means 1
	Out   string    // artifacts (NODEVIRT_OUT); "" means OutDir()
	Env   []string  // extra KEY=VALUE settings for the scripts (see hack/cluster/lib.sh)
	Log   io.Writer // receives the scripts' output; nil discards it
}

// Cluster is a running local cluster.
type Cluster struct {
	Dir         string // state directory
	Kubeconfig  string // admin kubeconfig
	APIServer   string // https://IP:PORT
	ServiceCIDR string
	// ImageVolumes: the ImageVolume feature gate is on in the API server
	// and the kubelets (IMAGE_VOLUMES, hack/cluster/lib.sh).
	ImageVolumes bool
	Nodes        []Node

	out string
	env []string
	log io.Writer
}

// Up starts a cluster (hack/cluster/up.sh) and returns it; with one already
// running in cfg.Dir it returns that one.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("local cluster: Config.Dir is required")
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 1
	}
	out := cfg.Out
	if out == "" {
		var err error
		if out, err = OutDir(); err != nil {
			return nil, err
		}
	}
	env := append([]string{"CLUSTER_DIR=" + cfg.Dir, "NODEVIRT_OUT=" + out, "NODES=" + strconv.Itoa(cfg.Nodes)}, cfg.Env...)
	if err := runScript(ctx, "up.sh", env, cfg.Log); err != nil {
		return nil, fmt.Errorf("local cluster %s: up: %w", cfg.Dir, err)
	}
	c, err := Load(cfg.Dir)
	if err != nil {
		return nil, err
	}
	c.out, c.env, c.log = out, env, cfg.Log
	return c, nil
}

// Load returns the cluster running from state directory dir.
func Load(dir string) (*Cluster, error) {
	f, err := os.Open(filepath.Join(dir, "cluster.env"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("local cluster %s: %w", dir, ErrNotRunning)
	}
	if err != nil {
		return nil, fmt.Errorf("local cluster %s: %w", dir, err)
	}
	defer f.Close()
	c, err := parseEnv(f)
	if err != nil {
		return nil, fmt.Errorf("local cluster %s: %w", dir, err)
	}
	if c.out, err = OutDir(); err != nil {
		return nil, err
	}
	c.env = []string{"CLUSTER_DIR=" + c.Dir, "NODEVIRT_OUT=" + c.out}
	return c, nil
}

// Down stops the cluster and restores the host (hack/cluster/down.sh).
func (c *Cluster) Down(ctx context.Context) error {
	if err := runScript(ctx, "down.sh", c.env, c.log); err != nil {
		return fmt.Errorf("local cluster %s: down: %w", c.Dir, err)
	}
	return nil
}

// Kubectl runs the cluster's kubectl (v1.34, built with the cluster) as
// admin with stdin (may be nil) and returns its standard output.
func (c *Cluster) Kubectl(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(c.out, "k8s", "bin", "kubectl"),
		append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("kubectl %v: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// Script runs hack/cluster/NAME with args against this cluster, its output
// to the cluster's log.
func (c *Cluster) Script(ctx context.Context, name string, args ...string) error {
	if err := runScript(ctx, name, c.env, c.log, args...); err != nil {
		return fmt.Errorf("local cluster %s: %s: %w", c.Dir, name, err)
	}
	return nil
}

// runScript runs hack/cluster/NAME with args, env added to the environment.
func runScript(ctx context.Context, name string, env []string, log io.Writer, args ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	if log == nil {
		log = io.Discard
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "cluster", name), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	return cmd.Run()
}
