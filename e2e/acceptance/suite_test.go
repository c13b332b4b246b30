package acceptance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

// namespace holds every object the scenarios create.
const namespace = "nodevirt-e2e"

// scenario is one line of the acceptance list.
type scenario struct {
	n    int
	name string
	run  func(t *testing.T, s *suite)
}

// scenario16 is scenario 16, Virtctl. Its idle console stays open ten
// minutes: the extras that restart the agent run before the scenario, the
// others while the console idles, and the console is checked after them.
const scenario16 = 16

// scenarios in the order they run (the project's priority order).
var scenarios = []scenario{
	{1, "ExampleVMRuns", testExampleVMRuns},
	{2, "GuestBoots", testGuestBoots},
	{3, "CloudInitUserData", testCloudInitUserData},
	{15, "KubeVirtManifests", testKubeVirtManifests},
	{12, "BadInput", testBadInput},
	{9, "LauncherPodDeleted", testLauncherPodDeleted},
	{6, "RunStrategies", testRunStrategies},
	{7, "QEMUKilled", testQEMUKilled},
	{5, "Pause", testPause},
	{11, "StartPaused", testStartPaused},
	{10, "GracePeriod", testGracePeriod},
	{8, "AgentRestart", testAgentRestart},
	{14, "Nodectl", testNodectl},
	{13, "Heartbeat", testHeartbeat},
	{4, "Masquerade", testMasquerade},
	// After every scenario and extra that restarts the agent: its idle
	// console must stay open for ten minutes.
	{scenario16, "Virtctl", testVirtctl},
}

// extra is a cluster check outside the numbered acceptance list (an issue's
// own end-to-end acceptance item). Extras share the suite's cluster and
// deployment and run as subtests named issue<N>_<name>.
type extra struct {
	issue int
	name  string
	run   func(t *testing.T, s *suite)
	agent agentUse
}

// agentUse says what an extra does to the node agent, which decides when it
// runs: scenario 16's idle console must not see the agent go.
type agentUse int

const (
	// keepsAgent: runs after scenario 16, while its console idles.
	keepsAgent agentUse = iota
	// restartsAgent: runs before scenario 16 (after the other scenarios).
	restartsAgent
	// redeploys nodevirt: runs last, after the idle console's check.
	redeploys
)

// extras in the order they run (each agentUse in its turn).
var extras = []extra{
	{21, "VMSnapshot", testVMSnapshot, restartsAgent},
	{18, "DevicesOutliveAgent", testDevicesOutliveAgent, restartsAgent},
	{10, "PrometheusScrape", testPrometheusScrape, keepsAgent},
	{19, "PVCs", testPVCs, keepsAgent},
	{19, "CSIStorage", testCSIStorage, keepsAgent},
	{19, "Instancetype", testInstancetypeVM, keepsAgent},
	{19, "EFI", testEFIVM, keepsAgent},
	{19, "SecureBoot", testSecureBootVM, keepsAgent},
	{19, "TPMKernelRefused", testTPMKernelRefused, keepsAgent},
	{19, "ReplicaSetScale", testReplicaSetScale, keepsAgent},
	{19, "Pool", testPool, keepsAgent},
	{21, "SnapshotFailures", testSnapshotFailures, keepsAgent},
	{20, "Accelerator", testAccelerator, keepsAgent},
	{20, "LiveConfiguration", testLiveConfiguration, keepsAgent},
	{23, "PodShape", testPodShape, keepsAgent},
	{23, "PodShapeFallback", testPodShapeFallback, redeploys},
}

// suite is what every scenario shares: the cluster, its clients and the
// names of the objects to dump on failure.
type suite struct {
	root    string
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	virt    versioned.Interface
	// demo is the VM of deploy/examples/vm.yaml, created by scenario 1 and
	// used by the scenarios after it until scenario 6 stops it.
	demo string
	// nodectlBin is cmd/nodectl, built on first use.
	nodectlBin string
	// top is TestAcceptance's own t, for what outlives one subtest: the
	// idle console of scenario 16, opened there and checked after the
	// extras that keep the agent.
	top *testing.T
	// idle is that console, nil until scenario 16 opens it.
	idle *idleConsole
}

func TestAcceptance(t *testing.T) {
	localcluster.RequirePrereqs(t) // skips in -short mode
	start := time.Now()
	s := setUp(t)
	t.Logf("setup (cluster, images, deploy): %v", time.Since(start).Round(100*time.Millisecond))

	times := map[int]time.Duration{}
	results := map[int]string{}
	var extraLines []string
	runExtras := func(use agentUse) {
		for _, x := range extras {
			if x.agent != use {
				continue
			}
			began := time.Now()
			result := runSub(t, fmt.Sprintf("issue%d_%s", x.issue, x.name), func(t *testing.T) {
				s.dumpOnFailure(t)
				x.run(t, s)
			})
			extraLines = append(extraLines, fmt.Sprintf("  issue %d %-20s %-8s %v", x.issue, x.name, result,
				time.Since(began).Round(100*time.Millisecond)))
		}
	}
	for _, sc := range scenarios {
		if sc.n == scenario16 {
			runExtras(restartsAgent)
		}
		began := time.Now()
		results[sc.n] = runSub(t, fmt.Sprintf("%02d_%s", sc.n, sc.name), func(t *testing.T) {
			if m, pending := Pending[sc.n]; pending || sc.run == nil {
				t.Skipf("pending: %s (issue %d)", m.Piece, m.Issue)
			}
			s.dumpOnFailure(t)
			sc.run(t, s)
		})
		times[sc.n] = time.Since(began)
		if _, pending := Pending[sc.n]; pending && results[sc.n] == "skipped" {
			results[sc.n] = "pending"
		}
	}
	runExtras(keepsAgent)
	began := time.Now()
	idle := runSub(t, fmt.Sprintf("%02d_VirtctlIdleConsole", scenario16), func(t *testing.T) {
		s.dumpOnFailure(t)
		testVirtctlIdle(t, s)
	})
	times[scenario16] += time.Since(began)
	if idle == "FAIL" {
		results[scenario16] = idle
	}
	runExtras(redeploys)
	report(t, times, results, extraLines, time.Since(start))
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

// dumpOnFailure dumps the cluster state when t fails.
func (s *suite) dumpOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			s.dump(t)
		}
	})
}

// report prints each scenario's and extra check's time and result and the
// pending list.
func report(t *testing.T, times map[int]time.Duration, results map[int]string, extraLines []string, total time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "acceptance scenarios (milestone 1), total %v:\n", total.Round(time.Second))
	for _, sc := range scenarios {
		fmt.Fprintf(&b, "  %2d %-20s %-8s %v\n", sc.n, sc.name, results[sc.n], times[sc.n].Round(100*time.Millisecond))
	}
	b.WriteString("extra checks:\n")
	for _, l := range extraLines {
		b.WriteString(l + "\n")
	}
	var ns []int
	for n := range Pending {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	b.WriteString("pending scenarios:\n")
	if len(ns) == 0 {
		b.WriteString("  none\n")
	}
	for _, n := range ns {
		issue := "no issue yet"
		if Pending[n].Issue != 0 {
			issue = fmt.Sprintf("issue %d", Pending[n].Issue)
		}
		fmt.Fprintf(&b, "  %2d: %s (%s)\n", n, Pending[n].Piece, issue)
	}
	t.Log(b.String())
}

// setUp reuses or starts the cluster, imports the images and deploys
// nodevirt (localcluster.Deployed); cleanups undo what it started.
func setUp(t *testing.T) *suite {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := localcluster.Deployed(t, &testLog{t: t})

	rc, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 50, 100
	s := &suite{top: t, root: root, cluster: c, kube: kubernetes.NewForConfigOrDie(rc), virt: versioned.NewForConfigOrDie(rc)}
	s.kubectl(t, nil, "create", "namespace", namespace)
	t.Cleanup(func() { s.deleteNamespace(t) })
	return s
}

// deleteNamespace removes everything the scenarios left and waits until
// the namespace is gone (the agent removes VMI finalizers after stopping
// the guests).
func (s *suite) deleteNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := s.cluster.Kubectl(ctx, nil, "delete", "namespace", namespace, "--wait=true", "--timeout=170s"); err != nil {
		t.Errorf("delete namespace %s: %v", namespace, err)
	}
}

// testLog is an io.Writer into t.Log, one call per write.
type testLog struct{ t *testing.T }

func (l *testLog) Write(p []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
