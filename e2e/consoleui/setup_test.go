package consoleui

import (
	"context"
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

// setUp reuses or starts the local cluster and deploys nodevirt from
// this tree (localcluster.Deployed, as e2e/acceptance does); cleanups undo
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
	c := localcluster.Deployed(t, testenv.LogWriter(t))
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return &env{root: root, out: out, cluster: c, virt: versioned.NewForConfigOrDie(rc)}
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
