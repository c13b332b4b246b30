package migration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// namespace holds every object the scenarios create.
const namespace = "nodevirt-migration"

// scenario is one scenario of the suite (see doc.go); n is its number in
// the acceptance list (0: the proving ground, no number).
type scenario struct {
	name string
	n    int
	run  func(t *testing.T, s *suite)
}

// scenarios in the order they run: the cheap ones first.
var scenarios = []scenario{
	{"VMOnEachNode", 0, testVMOnEachNode},
	{"NotMigratable", 17, testNotMigratable},
	{"RoundTrip", 17, testRoundTrip},
	{"Disks", 17, testDisks},
	{"SharedPVC", 19, testSharedPVC},
	{"Cancel", 17, testCancel},
	{"AgentKilled", 17, testAgentKilled},
	{"Drain", 18, testDrain},
	{"Bench", 0, testBench},
}

// suite is what every scenario shares.
type suite struct {
	root    string
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	virt    versioned.Interface

	mu       sync.Mutex
	measures []string
}

// measure logs one measured number and keeps it for the final report.
func (s *suite) measure(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log("MEASURE " + line)
	s.mu.Lock()
	s.measures = append(s.measures, line)
	s.mu.Unlock()
}

func TestMigration(t *testing.T) {
	localcluster.RequirePrereqs(t) // skips in -short mode
	start := time.Now()
	s := setUp(t)
	t.Logf("setup (two-node cluster, deploy): %v", time.Since(start).Round(100*time.Millisecond))

	times := map[string]time.Duration{}
	results := map[string]string{}
	for _, sc := range scenarios {
		began := time.Now()
		results[sc.name] = runSub(t, sc.name, func(t *testing.T) {
			if m, pending := Pending[sc.name]; pending {
				t.Skipf("pending: %s (issue %d)", m.Piece, m.Issue)
			}
			s.dumpOnFailure(t)
			sc.run(t, s)
		})
		times[sc.name] = time.Since(began)
		if _, pending := Pending[sc.name]; pending && results[sc.name] == "skipped" {
			results[sc.name] = "pending"
		}
	}
	s.report(t, times, results, time.Since(start))
}

// runSub runs f as subtest name and says how it ended: ok, FAIL, skipped,
// or "not run" (filtered out by -run).
func runSub(t *testing.T, name string, f func(t *testing.T)) string {
	ran, skipped := false, false
	ok := t.Run(name, func(t *testing.T) {
		ran = true
		defer func() { skipped = t.Skipped() }()
		f(t)
	})
	switch {
	case !ok:
		return "FAIL"
	case !ran:
		return "not run"
	case skipped:
		return "skipped"
	}
	return "ok"
}

// report prints each scenario's result and time, the measurements and the
// pending list.
func (s *suite) report(t *testing.T, times map[string]time.Duration, results map[string]string, total time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "migration scenarios, total %v:\n", total.Round(time.Second))
	for _, sc := range scenarios {
		n := "  "
		if sc.n != 0 {
			n = fmt.Sprint(sc.n)
		}
		fmt.Fprintf(&b, "  %s %-14s %-8s %v\n", n, sc.name, results[sc.name], times[sc.name].Round(100*time.Millisecond))
	}
	b.WriteString("measured:\n")
	s.mu.Lock()
	for _, m := range s.measures {
		b.WriteString("  " + m + "\n")
	}
	s.mu.Unlock()
	var names []string
	for n := range Pending {
		names = append(names, n)
	}
	sort.Strings(names)
	b.WriteString("pending scenarios:\n")
	if len(names) == 0 {
		b.WriteString("  none\n")
	}
	for _, n := range names {
		fmt.Fprintf(&b, "  %s: %s (issue %d)\n", n, Pending[n].Piece, Pending[n].Issue)
	}
	t.Log(b.String())
}

// setUp takes the cluster lock, reuses a running cluster with two nodes or
// starts one, deploys nodevirt and creates the namespace; cleanups undo
// what it started.
func setUp(t *testing.T) *suite {
	t.Helper()
	root, err := localcluster.RepoRoot()
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
	s := &suite{root: root}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var reused bool
	s.cluster, reused = s.startCluster(t, ctx)

	began := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "deploy-local.sh"))
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+s.cluster.Dir)
	if reused {
		// freshly imported images under unchanged tags
		cmd.Env = append(cmd.Env, "RESTART=1")
	}
	cmd.Stdout, cmd.Stderr = testenv.LogWriter(t), testenv.LogWriter(t)
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/deploy-local.sh: %v", err)
	}
	s.measure(t, "deploy nodevirt on %d nodes (deploy-local.sh until every node offers devices.kubevirt.io/tun): %v",
		len(s.cluster.Nodes), time.Since(began).Round(100*time.Millisecond))

	rc, err := clientcmd.BuildConfigFromFlags("", s.cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 50, 100
	s.kube, s.virt = kubernetes.NewForConfigOrDie(rc), versioned.NewForConfigOrDie(rc)
	s.kubectl(t, nil, "create", "namespace", namespace)
	t.Cleanup(func() { s.deleteNamespace(t) })
	return s
}

// startCluster reuses the host's running local cluster when it has two
// nodes or more, else starts a two-node one (stopped at the end unless
// NODEVIRT_E2E_KEEP=1). A running cluster with one node belongs to someone
// else: the suite requires (testenv.Require) that it is stopped first.
// reused says whether the cluster was already running.
func (s *suite) startCluster(t *testing.T, ctx context.Context) (c *localcluster.Cluster, reused bool) {
	t.Helper()
	dir := os.Getenv("NODEVIRT_E2E_CLUSTER_DIR")
	if dir == "" {
		dir = filepath.Join(s.root, ".cluster")
	}
	if marker, err := os.ReadFile("/run/nodevirt-cluster"); err == nil {
		dir = strings.TrimSpace(string(marker)) // one cluster per host: use the running one
	}
	c, err := localcluster.Load(dir)
	switch {
	case err == nil:
		testenv.Require(t, len(c.Nodes) >= 2,
			fmt.Sprintf("a local cluster with two nodes (the one running in %s has %d)", dir, len(c.Nodes)),
			"cluster-down; make cluster-up NODES=2")
		t.Logf("reusing the local cluster in %s (%d nodes)", dir, len(c.Nodes))
		if err := runIn(ctx, t, s.root, "make", "--no-print-directory", "images"); err != nil {
			t.Fatalf("make images: %v", err)
		}
		return c, true
	case !errors.Is(err, localcluster.ErrNotRunning):
		t.Fatal(err)
	}
	t.Logf("starting a two-node local cluster in %s", dir)
	began := time.Now()
	c, err = localcluster.Up(ctx, localcluster.Config{Dir: dir, Nodes: 2, Log: testenv.LogWriter(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.measure(t, "cluster-up NODES=2: %v", time.Since(began).Round(100*time.Millisecond))
	if os.Getenv("NODEVIRT_E2E_KEEP") != "1" {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			began := time.Now()
			if err := c.Down(ctx); err != nil {
				t.Errorf("cluster down: %v", err)
			}
			t.Logf("MEASURE cluster-down NODES=2: %v", time.Since(began).Round(100*time.Millisecond))
		})
	}
	return c, false
}

// deleteNamespace removes everything the scenarios left and waits until
// the namespace is gone.
func (s *suite) deleteNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := s.cluster.Kubectl(ctx, nil, "delete", "namespace", namespace, "--wait=true", "--timeout=170s"); err != nil {
		t.Errorf("delete namespace %s: %v", namespace, err)
	}
}

// runIn runs a command in dir with its output in the test log.
func runIn(ctx context.Context, t *testing.T, dir string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = testenv.LogWriter(t), testenv.LogWriter(t)
	return cmd.Run()
}
