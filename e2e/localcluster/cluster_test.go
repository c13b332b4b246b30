package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// TestSingleNode brings a one-node cluster up, runs a pod from a locally
// built image, uses logs and exec through the API server, reaches the API
// server from the pod through the kubernetes Service, and checks that
// cluster-down leaves nothing behind.
func TestSingleNode(t *testing.T) {
	c := startCluster(t, 1)
	ctx := testContext(t, 3*time.Minute)
	server := runProbeServer(t, ctx, c, "probe-0", c.Nodes[0].Name)

	logs := kubectl(t, ctx, c, nil, "logs", server)
	if !strings.Contains(logs, "listening on :8080") {
		t.Errorf("kubectl logs %s = %q, want the listening line", server, logs)
	}
	got := kubectl(t, ctx, c, nil, "exec", server, "--", "/probe", "get", "http://127.0.0.1:8080/")
	if want := "probe " + server; strings.TrimSpace(got) != want {
		t.Errorf("kubectl exec get = %q, want %q", got, want)
	}
	checkAPIFromPod(t, ctx, c, server)
	checkDeployLocal(t, ctx, c)
	stopCluster(t, c)
}

// checkDeployLocal applies the local cluster's first install step
// (deploy/local/operator: the namespace, the CRDs, the operator) and waits
// until the CRDs are served.
func checkDeployLocal(t *testing.T, ctx context.Context, c *Cluster) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl(t, ctx, c, nil, "apply", "-k", filepath.Join(root, "deploy", "local", "operator"))
	kubectl(t, ctx, c, nil, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
	kubectl(t, ctx, c, nil, "get", "namespace", "nodevirt")
}

// TestTwoNodes brings up two nodes, pins a pod to each and checks pod-to-pod
// traffic across the nodes in both directions.
func TestTwoNodes(t *testing.T) {
	c := startCluster(t, 2)
	ctx := testContext(t, 3*time.Minute)
	if len(c.Nodes) != 2 {
		t.Fatalf("cluster has %d nodes, want 2", len(c.Nodes))
	}
	var pods, ips []string
	for i, n := range c.Nodes {
		pod := runProbeServer(t, ctx, c, fmt.Sprintf("probe-%d", i), n.Name)
		ip := strings.TrimSpace(kubectl(t, ctx, c, nil, "get", "pod", pod, "-o", "jsonpath={.status.podIP}"))
		_, cidr, err := net.ParseCIDR(n.PodCIDR)
		if err != nil {
			t.Fatalf("node %s pod CIDR %q: %v", n.Name, n.PodCIDR, err)
		}
		if !cidr.Contains(net.ParseIP(ip)) {
			t.Errorf("pod %s on %s has IP %s, not in the node's pod CIDR %s", pod, n.Name, ip, n.PodCIDR)
		}
		pods, ips = append(pods, pod), append(ips, ip)
	}
	for from := range pods {
		to := 1 - from
		got := kubectl(t, ctx, c, nil, "exec", pods[from], "--", "/probe", "get", "http://"+net.JoinHostPort(ips[to], "8080")+"/")
		if want := "probe " + pods[to]; strings.TrimSpace(got) != want {
			t.Errorf("%s -> %s: got %q, want %q", pods[from], pods[to], got, want)
		}
	}
	// The server saw the client's pod IP: no masquerading between nodes.
	if logs := kubectl(t, ctx, c, nil, "logs", pods[1]); !strings.Contains(logs, "from "+ips[0]+":") {
		t.Errorf("server %s logs %q: want a request from %s", pods[1], logs, ips[0])
	}
	checkAPIFromPod(t, ctx, c, pods[1])
	checkDevicePluginDirs(t, c)
	checkDaemonCgroups(t, c)

	// A crashed kubelet must not keep cluster-down from cleaning up: its
	// pods are killed through containerd instead of drained.
	killDaemon(t, c, "kubelet1")
	stopCluster(t, c)
}

// checkDevicePluginDirs checks that every kubelet has a device-plugin
// directory of its own: its registration socket (kubelet.sock) is in the
// directory cluster.env names for it, and no two nodes name the same one.
func checkDevicePluginDirs(t *testing.T, c *Cluster) {
	t.Helper()
	seen := map[string]string{}
	for _, n := range c.Nodes {
		if other, dup := seen[n.DevicePlugins]; dup {
			t.Errorf("nodes %s and %s share the device-plugin directory %q", other, n.Name, n.DevicePlugins)
		}
		seen[n.DevicePlugins] = n.Name
		fi, err := os.Stat(filepath.Join(n.DevicePlugins, "kubelet.sock"))
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Errorf("node %s: no kubelet.sock in its device-plugin directory %q: %v", n.Name, n.DevicePlugins, err)
		}
	}
}

// checkDaemonCgroups checks the cpu cgroups cluster-up puts its daemons in
// (host_cpu_groups): the control plane's, and each node's system cgroup
// beside the kubelet's kubepods, weighed as on a systemd node, so that pods
// are not starved by the daemons' threads under load.
func checkDaemonCgroups(t *testing.T, c *Cluster) {
	t.Helper()
	want := map[string]string{
		"etcd": "/nodevirt-control", "kube-apiserver": "/nodevirt-control",
		"kube-scheduler": "/nodevirt-control", "kube-controller-manager": "/nodevirt-control",
	}
	for i, n := range c.Nodes {
		want[fmt.Sprintf("containerd%d", i)] = "/" + n.Name + "/system"
		want[fmt.Sprintf("kubelet%d", i)] = "/" + n.Name + "/system"
	}
	for name, cg := range want {
		if got := cpuCgroup(t, daemonPID(t, c, name)); got != cg {
			t.Errorf("%s is in cpu cgroup %q, want %q", name, got, cg)
		}
	}
	for _, n := range c.Nodes {
		for cg, shares := range map[string]string{n.Name + "/system": "1024", n.Name + "/kubepods": strconv.Itoa(1024 * runtime.NumCPU())} {
			raw, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", cg, "cpu.shares"))
			if err != nil {
				t.Errorf("cpu cgroup %s: %v", cg, err)
			} else if got := strings.TrimSpace(string(raw)); got != shares {
				t.Errorf("cpu cgroup %s has cpu.shares %s, want %s", cg, got, shares)
			}
		}
	}
}

// cpuCgroup is the cgroup of pid in the v1 cpu hierarchy.
func cpuCgroup(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		// hierarchy-ID:controllers:path, controllers comma-separated
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return f[2]
		}
	}
	t.Fatalf("pid %d: no cpu hierarchy in /proc/%d/cgroup: %q", pid, pid, raw)
	return ""
}

// daemonPID is the recorded pid of one of the cluster's daemons.
func daemonPID(t *testing.T, c *Cluster, name string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.Dir, "run", name+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("%s pid file: %v", name, err)
	}
	return pid
}

// killDaemon SIGKILLs one of the cluster's daemons by its recorded pid.
func killDaemon(t *testing.T, c *Cluster, name string) {
	t.Helper()
	pid := daemonPID(t, c, name)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s (%d): %v", name, pid, err)
	}
}

// startCluster checks the prerequisites, takes the host-wide lock, records
// the host state and starts a cluster in a fresh state directory. Cleanup
// stops it if the test did not.
func startCluster(t *testing.T, nodes int) *Cluster {
	t.Helper()
	out := requirePrereqs(t) // skips in -short mode
	unlock, err := Lock(testContext(t, LockWait))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	ctx := testContext(t, 5*time.Minute)
	requireNoCluster(t)
	// A short path: unix sockets (containerd, kubelet device plugins) live
	// under it and must stay within 108 bytes.
	dir, err := os.MkdirTemp("/var/tmp", "nvc-")
	if err != nil {
		t.Fatal(err)
	}
	before := snapshotHost(t)
	log := &testWriter{t: t}
	start := time.Now()
	c, err := Up(ctx, Config{Dir: dir, Nodes: nodes, Out: out, Log: log})
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(dir, "cluster.env")); err == nil {
			down := &Cluster{Dir: dir, out: out, env: []string{"CLUSTER_DIR=" + dir, "NODEVIRT_OUT=" + out}, log: log}
			if err := down.Down(context.Background()); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		checkRestored(t, dir, before)
		if t.Failed() {
			logTails(t, filepath.Join(dir, "logs"))
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE cluster-up nodes=%d: %v", nodes, time.Since(start).Round(10*time.Millisecond))
	t.Logf("MEASURE idle cluster RSS nodes=%d: %d MiB", nodes, clusterRSS(t, dir)>>20)
	return c
}

// stopCluster runs cluster-down and times it; the cleanup then finds
// nothing to do and checks the host.
func stopCluster(t *testing.T, c *Cluster) {
	t.Helper()
	start := time.Now()
	if err := c.Down(testContext(t, 2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	t.Logf("MEASURE cluster-down nodes=%d: %v", len(c.Nodes), time.Since(start).Round(10*time.Millisecond))
}

// checkRestored fails the test for anything the cluster left on the host.
func checkRestored(t *testing.T, dir string, before hostState) {
	t.Helper()
	procs, mounts := leftovers(t, dir)
	if len(procs) > 0 {
		t.Errorf("processes left after cluster-down:\n%s", strings.Join(procs, "\n"))
	}
	if len(mounts) > 0 {
		t.Errorf("mounts left after cluster-down:\n%s", strings.Join(mounts, "\n"))
	}
	if diff := cmp.Diff(before, snapshotHost(t)); diff != "" {
		t.Errorf("host state changed by cluster up/down (-before +after):\n%s", diff)
	}
}

// hostMarker names the state directory of the host's running cluster
// (written by hack/cluster/up.sh).
const hostMarker = "/run/nodevirt-cluster"

// requireNoCluster skips (fails with CI=true) when another local cluster
// runs: there can be only one per host. The gate is testenv.Require's; the
// check (the host marker and the other cluster's pid files) is its own.
func requireNoCluster(t *testing.T) {
	t.Helper()
	dir, err := os.ReadFile(hostMarker)
	if err != nil {
		return
	}
	other := strings.TrimSpace(string(dir))
	pids, _ := filepath.Glob(filepath.Join(other, "run", "*.pid"))
	testenv.Require(t, len(pids) == 0, "no other local cluster on this host (one runs from "+other+")",
		"cluster-down CLUSTER_DIR="+other)
}

// requirePrereqs returns the artifacts directory, or skips (in -short
// mode, or locally) or fails (CI=true) through testenv.Require when root,
// the Kubernetes binaries or the images are missing.
func requirePrereqs(t *testing.T) string {
	t.Helper()
	testenv.Require(t, os.Geteuid() == 0, "root (the local cluster)", "test-cluster` as root, e.g. `sudo make test-cluster")
	out, err := OutDir()
	if err != nil {
		t.Fatal(err)
	}
	var bins []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet", "kube-proxy", "kubectl"} {
		bins = append(bins, filepath.Join(out, "k8s", "bin", b))
	}
	testenv.RequireFiles(t, "cluster-binaries", bins...)
	testenv.RequireFiles(t, "images", filepath.Join(out, "images", "pause.tar"), filepath.Join(out, "images", "probe.tar"))
	return out
}

// runProbeServer starts the probe HTTP server in a pod pinned (by node
// selector, through the scheduler) to node and waits until it is Running.
func runProbeServer(t *testing.T, ctx context.Context, c *Cluster, name, node string) string {
	t.Helper()
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: probe}
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  terminationGracePeriodSeconds: 1
  containers:
  - name: probe
    image: nodevirt.local/probe:dev
    imagePullPolicy: Never
    args: [serve, -addr, ":8080"]
    ports: [{containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
`, name, node)
	start := time.Now()
	kubectl(t, ctx, c, strings.NewReader(manifest), "apply", "-f", "-")
	kubectl(t, ctx, c, nil, "wait", "pod/"+name, "--for=jsonpath={.status.phase}=Running", "--timeout=60s")
	t.Logf("MEASURE pod create->Running (%s on %s): %v", name, node, time.Since(start).Round(10*time.Millisecond))
	kubectl(t, ctx, c, nil, "wait", "pod/"+name, "--for=condition=Ready", "--timeout=60s")
	if got := strings.TrimSpace(kubectl(t, ctx, c, nil, "get", "pod", name, "-o", "jsonpath={.spec.nodeName}")); got != node {
		t.Fatalf("pod %s runs on %q, want %q", name, got, node)
	}
	return name
}

// checkAPIFromPod makes pod talk to the API server through the kubernetes
// Service's ClusterIP with its service-account token.
func checkAPIFromPod(t *testing.T, ctx context.Context, c *Cluster, pod string) {
	t.Helper()
	svcIP := strings.TrimSpace(kubectl(t, ctx, c, nil, "get", "service", "kubernetes", "-o", "jsonpath={.spec.clusterIP}"))
	got := kubectl(t, ctx, c, nil, "exec", pod, "--", "/probe", "kube")
	want := fmt.Sprintf("apiserver %s status=201 user=system:serviceaccount:default:default", net.JoinHostPort(svcIP, "443"))
	if strings.TrimSpace(got) != want {
		t.Errorf("API check from pod %s = %q, want %q", pod, got, want)
	}
}

// kubectl runs kubectl and fails the test on error.
func kubectl(t *testing.T, ctx context.Context, c *Cluster, stdin io.Reader, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// clusterRSS sums the resident memory of the cluster's daemons.
func clusterRSS(t *testing.T, dir string) int64 {
	t.Helper()
	pidFiles, _ := filepath.Glob(filepath.Join(dir, "run", "*.pid"))
	var total int64
	for _, f := range pidFiles {
		pid, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "status"))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(status), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(l, "VmRSS: %d kB", &kb); err == nil {
				t.Logf("  %s: %d MiB", strings.TrimSuffix(filepath.Base(f), ".pid"), kb>>10)
				total += kb << 10
			}
		}
	}
	return total
}

// logTails puts the end of every cluster log into the test log.
func logTails(t *testing.T, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		raw, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		t.Logf("--- %s (tail)\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testWriter sends script output to the test log, line by line.
type testWriter struct {
	t   *testing.T
	buf bytes.Buffer
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if errors.Is(err, io.EOF) {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
}
