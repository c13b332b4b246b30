package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// namespace holds every object of the run.
const namespace = "nodevirt-chaos"

// The run's size, overridable from the environment (make chaos).
const (
	defaultSeed       = 1
	defaultAgentKills = 20
	defaultMaxGap     = 4 * time.Second
	residents         = 2
)

// harness is one chaos run on the local cluster: its clients, the node it
// hits, the residents' baselines and what it recorded.
type harness struct {
	root    string
	cluster *localcluster.Cluster
	node    localcluster.Node
	kube    kubernetes.Interface
	virt    versioned.Interface
	rc      *rest.Config
	start   time.Time

	mu         sync.Mutex
	report     Report
	residents  map[string]baseline
	launchers  map[string]bool // UIDs of every launcher pod seen
	violations map[string]bool // dedup of the violations recorded
	// storeFull is set while a StoreFull fault holds the store's
	// filesystem full: the node refusing new VMIs is then expected.
	storeFull atomic.Bool
}

// TestChaos runs a seeded schedule of faults against nodevirt on the local
// cluster while the workload runs, checking the invariants after each (see
// doc.go). NODEVIRT_CHAOS_SEED, NODEVIRT_CHAOS_AGENT_KILLS and
// NODEVIRT_CHAOS_EACH (faults of every other kind) size it;
// NODEVIRT_CHAOS_REPORT=<dir> writes chaos.md and chaos.json there.
func TestChaos(t *testing.T) {
	localcluster.RequirePrereqs(t)
	cfg := Config{
		Seed:       envInt(t, "NODEVIRT_CHAOS_SEED", defaultSeed),
		AgentKills: int(envInt(t, "NODEVIRT_CHAOS_AGENT_KILLS", defaultAgentKills)),
		EachOther:  int(envInt(t, "NODEVIRT_CHAOS_EACH", 1)),
		MaxGap:     defaultMaxGap,
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	h := setUp(t)
	h.report.Seed = cfg.Seed
	schedule := Schedule(cfg)
	t.Logf("chaos: seed %d, %d faults on %s", cfg.Seed, len(schedule), h.node.Name)

	h.startResidents(t)
	h.startMigrant(t)
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); h.migrate(ctx) }()
	go func() { defer wg.Done(); h.consoleResidents(ctx) }()
	go func() { defer wg.Done(); h.watchResidents(ctx) }()
	go func() { defer wg.Done(); h.probeResidents(ctx) }()
	go func() { defer wg.Done(); h.churn(ctx) }()

	for _, f := range schedule {
		if ctx.Err() != nil {
			break
		}
		time.Sleep(f.Gap)
		o := h.inject(t, f)
		o.Violations = append(o.Violations, h.checkAfterFault(t)...)
		for _, v := range o.Violations {
			h.violate(fmt.Sprintf("after fault %d (%s): %s", f.Seq, f.Kind, v))
		}
		h.mu.Lock()
		h.report.Outcomes = append(h.report.Outcomes, o)
		h.mu.Unlock()
		t.Logf("fault %d/%d %s on %s: recovered in %v%s", f.Seq, len(schedule), f.Kind, o.Target,
			o.Recovery.Round(10*time.Millisecond), violationsSuffix(o.Violations))
	}
	stop()
	wg.Wait()
	h.finalChecks(t)
	h.finish(t)
}

// setUp deploys nodevirt on a two-node local cluster
// (localcluster.DeployedNodes) and creates the run's namespace. The faults
// hit the first node; the migrant moves between both.
func setUp(t *testing.T) *harness {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := localcluster.DeployedNodes(t, testenv.LogWriter(t), 2)
	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 50, 100
	rc.Timeout = 15 * time.Second // an API outage fails calls instead of hanging them
	h := &harness{
		root: root, cluster: c, node: c.Nodes[0], start: time.Now(), rc: rc,
		kube: kubernetes.NewForConfigOrDie(rc), virt: versioned.NewForConfigOrDie(rc),
		residents: map[string]baseline{}, launchers: map[string]bool{}, violations: map[string]bool{},
	}
	h.report.Started, h.report.Nodes, h.report.Residents = h.start, len(c.Nodes), residents
	h.report.Commit = gitCommit(root)
	h.requireFastRestarts(t)
	h.kubectl(t, "create", "namespace", namespace)
	t.Cleanup(func() {
		if _, err := c.KubectlText(5*time.Minute, nil, "delete", "namespace", namespace, "--wait=true", "--timeout=4m"); err != nil {
			t.Errorf("delete namespace %s: %v", namespace, err)
		}
	})
	return h
}

// requireFastRestarts fails early on a cluster started before its kubelets
// capped the container restart backoff (hack/cluster/config.sh): hundreds
// of agent kills would otherwise wait minutes each.
func (h *harness) requireFastRestarts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(h.node.Dir, "kubelet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "maxContainerRestartPeriod") {
		t.Fatalf("the running local cluster's kubelet has the default restart backoff (up to 5 min): "+
			"restart it (make cluster-down) so it gets %s's crashLoopBackOff", "hack/cluster/config.sh")
	}
}

// finish writes the report (NODEVIRT_CHAOS_REPORT) and fails the test on
// every violation.
func (h *harness) finish(t *testing.T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.report.Duration = time.Since(h.start)
	md := h.report.Markdown()
	t.Log("\n" + md)
	if dir := os.Getenv("NODEVIRT_CHAOS_REPORT"); dir != "" {
		js, err := h.report.JSON()
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"chaos.md": []byte(md), "chaos.json": js} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("report written to %s/chaos.{md,json}", dir)
	}
	for _, v := range h.report.Violations {
		t.Error(v)
	}
}

// violate records a broken invariant once.
func (h *harness) violate(v string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.violations[v] {
		return
	}
	h.violations[v] = true
	h.report.Violations = append(h.report.Violations, v)
}

func violationsSuffix(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return fmt.Sprintf(", %d violation(s): %s", len(v), strings.Join(v, "; "))
}

// kubectl runs kubectl and fails the test on error.
func (h *harness) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := h.cluster.KubectlText(2*time.Minute, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// restartDaemon runs hack/cluster/restart.sh name [down].
func (h *harness) restartDaemon(t *testing.T, name string, down time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(h.root, "hack", "cluster", "restart.sh"), name, strconv.Itoa(int(down.Seconds())))
	cmd.Env = append(os.Environ(), "CLUSTER_DIR="+h.cluster.Dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restart %s: %v\n%s", name, err, out)
	}
}

// await polls cond until it returns nil or timeout passes, and returns
// its last error then; it never fails the test (the workload and the
// watchers run outside the test's goroutine).
func await(ctx context.Context, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (cancelled: %w)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func envInt(t *testing.T, name string, def int64) int64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
