package devices

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/deviceplugin"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

// TestCluster_RealKubelet runs the plugins for this host's devices against
// a real kubelet of the local cluster: the node advertises tun (and kvm only
// where KVM is usable), an unprivileged pod that requests tun gets a usable
// /dev/net/tun while one that does not gets none, and after the kubelet is
// SIGKILLed and restarted the plugins register again and pods still get
// the device.
func TestCluster_RealKubelet(t *testing.T) {
	c := localCluster(t)
	ctx := testContextFor(t, 5*time.Minute)
	if len(c.Nodes) != 1 {
		// The kubelet's device-plugin directory is fixed at
		// /var/lib/kubelet/device-plugins whatever its --root-dir, so the
		// nodes of a multi-node local cluster share (and fight over) it.
		testenv.Require(t, false, fmt.Sprintf("a one-node local cluster (the running one has %d nodes)", len(c.Nodes)), "cluster-down; make cluster-up")
	}
	node := c.Nodes[0]
	host := os.DirFS("/")
	kvm := convert.DetectKVM(host)
	devs := deviceplugin.HostDevices(host, kvm.Usable)
	t.Logf("KVM usable=%v (%s); devices %v", kvm.Usable, kvm.Reason, devs)
	if _, err := os.Stat("/sys/module/kvm_pvm"); err == nil && kvm.Usable {
		t.Errorf("convert.DetectKVM() on a kvm_pvm host = %+v, want not usable", kvm)
	}

	start := time.Now()
	plugins := runPlugins(t, devs)
	want := map[string]string{deviceplugin.ResourceKVM: "", deviceplugin.ResourceTun: "", deviceplugin.ResourceVhostNet: ""}
	for _, d := range devs {
		want[d.Resource] = strconv.Itoa(deviceplugin.DefaultCount)
	}
	if want[deviceplugin.ResourceTun] == "" {
		t.Fatal("this host has no /dev/net/tun")
	}
	waitAllocatable(t, ctx, c, node.Name, want)
	t.Logf("MEASURE plugin start -> node allocatable: %v", time.Since(start).Round(time.Millisecond))

	checkTunPods(t, ctx, c, node.Name, "before")

	regs := plugins[deviceplugin.ResourceTun].Registrations()
	start = time.Now()
	restartKubelet(t, ctx, c, 0)
	testenv.Eventually(t, within(ctx, time.Minute), "the tun plugin to re-register after the kubelet restart", func() bool {
		return plugins[deviceplugin.ResourceTun].Registrations() > regs
	})
	t.Logf("MEASURE kubelet restart -> tun re-registered: %v", time.Since(start).Round(time.Millisecond))
	kubectl(t, ctx, c, nil, "wait", "node/"+node.Name, "--for=condition=Ready", "--timeout=60s")
	waitAllocatable(t, ctx, c, node.Name, want)
	checkTunPods(t, ctx, c, node.Name, "after")
}

// runPlugins serves devs to the kubelet until the test ends.
func runPlugins(t *testing.T, devs []deviceplugin.Device) map[string]*deviceplugin.Plugin {
	t.Helper()
	cfg := deviceplugin.Config{
		// Not under node.KubeletRoot: kubelet 1.34 hardcodes its
		// registration socket to /var/lib/kubelet/device-plugins.
		Dir:          deviceplugin.DefaultDir,
		PollInterval: 200 * time.Millisecond,
		Logger:       testenv.Logger(t),
	}
	ctx, cancel := context.WithCancel(context.Background())
	plugins := map[string]*deviceplugin.Plugin{}
	done := make(chan error, len(devs))
	for _, d := range devs {
		p, err := deviceplugin.New(d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		plugins[d.Resource] = p
		go func() { done <- p.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range devs {
			<-done
		}
		for _, p := range plugins {
			if _, err := os.Stat(p.Socket()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("plugin socket %s after stop: %v, want removed", p.Socket(), err)
			}
		}
	})
	return plugins
}

// waitAllocatable polls the node until each resource's allocatable count
// is as wanted ("" = absent).
func waitAllocatable(t *testing.T, ctx context.Context, c *localcluster.Cluster, node string, want map[string]string) {
	t.Helper()
	testenv.Eventually(t, within(ctx, time.Minute), fmt.Sprintf("node %s allocatable %v", node, want), func() error {
		got := map[string]string{}
		for r := range want {
			jp := fmt.Sprintf("jsonpath={.status.allocatable.%s}", strings.ReplaceAll(r, ".", `\.`))
			out, err := c.Kubectl(ctx, nil, "get", "node", node, "-o", jp)
			if err != nil {
				t.Fatal(err)
			}
			got[r] = strings.TrimSpace(string(out))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("node %s allocatable = %v, want %v", node, got, want)
		}
		return nil
	})
}

// within is how long a wait may take: at most limit, and no longer than
// ctx (the test's overall deadline) allows. Eventually's poll interval
// grows with the timeout, so a bounded wait keeps the MEASURE figures fine.
func within(ctx context.Context, limit time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return min(limit, time.Until(dl))
	}
	return limit
}

// checkTunPods runs two unprivileged pods (uid 107, no capabilities):
// one requesting devices.kubevirt.io/tun must open /dev/net/tun read-write,
// one without the request must not have it.
func checkTunPods(t *testing.T, ctx context.Context, c *localcluster.Cluster, node, suffix string) {
	t.Helper()
	with, without := "tun-"+suffix, "no-tun-"+suffix
	start := time.Now()
	kubectl(t, ctx, c, strings.NewReader(tunPod(with, node, true)+"---\n"+tunPod(without, node, false)), "apply", "-f", "-")
	t.Cleanup(func() {
		c.Kubectl(context.Background(), nil, "delete", "pod", with, without, "--ignore-not-found", "--grace-period=0", "--force") //nolint:errcheck // best effort
	})
	kubectl(t, ctx, c, nil, "wait", "pod/"+with, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=90s")
	t.Logf("MEASURE unprivileged tun pod create -> Succeeded (%s): %v", suffix, time.Since(start).Round(10*time.Millisecond))
	got := strings.TrimSpace(kubectl(t, ctx, c, nil, "logs", with))
	if want := "/dev/net/tun char 10:200 uid=107 open=rw"; got != want {
		t.Errorf("pod %s: probe dev = %q, want %q", with, got, want)
	}
	kubectl(t, ctx, c, nil, "wait", "pod/"+without, "--for=jsonpath={.status.phase}=Failed", "--timeout=90s")
	if got := kubectl(t, ctx, c, nil, "logs", without); !strings.Contains(got, "no such file or directory") {
		t.Errorf("pod %s without the resource: probe dev = %q, want no /dev/net/tun", without, got)
	}
}

func tunPod(name, node string, request bool) string {
	resources := "{}"
	if request {
		resources = "{limits: {" + deviceplugin.ResourceTun + ": 1}}"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  nodeSelector: {kubernetes.io/hostname: %s}
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 107, runAsGroup: 107, runAsNonRoot: true}
  containers:
  - name: probe
    image: nodevirt.local/probe:dev
    imagePullPolicy: Never
    args: [dev, /dev/net/tun]
    resources: %s
    securityContext:
      privileged: false
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
`, name, node, resources)
}

// restartKubelet SIGKILLs node i's kubelet by its pid file and starts it
// again with the same command line, the way hack/cluster/up.sh starts
// daemons (own session, output appended to its log, pid file updated), so
// cluster-down stops the new one.
func restartKubelet(t *testing.T, ctx context.Context, c *localcluster.Cluster, i int) {
	t.Helper()
	name := fmt.Sprintf("kubelet%d", i)
	pidFile := filepath.Join(c.Dir, "run", name+".pid")
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("%s: %v", pidFile, err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if !strings.HasSuffix(args[0], "kubelet") || !strings.Contains(string(cmdline), c.Dir) {
		t.Fatalf("pid %d from %s is not this cluster's kubelet: %q", pid, pidFile, args)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s (%d): %v", name, pid, err)
	}
	testenv.Eventually(t, within(ctx, 30*time.Second), fmt.Sprintf("%s (%d) to die of SIGKILL", name, pid), func() bool {
		return !localcluster.ProcessAlive(pid)
	})
	sh := exec.CommandContext(ctx, "sh", append([]string{"-c", `setsid "$@" </dev/null >>"$LOG" 2>&1 & echo $!`, "sh"}, args...)...)
	sh.Env = append(os.Environ(), "LOG="+filepath.Join(c.Dir, "logs", name+".log"))
	out, err := sh.Output()
	if err != nil {
		t.Fatalf("restart %s: %v", name, err)
	}
	if err := os.WriteFile(pidFile, out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted %s: pid %d -> %s", name, pid, strings.TrimSpace(string(out)))
}

// localCluster returns the running local cluster (with this checkout's
// probe image imported) or starts one that is stopped when the test ends.
// It holds the host-wide cluster lock for the whole test.
func localCluster(t *testing.T) *localcluster.Cluster {
	t.Helper()
	out := requireClusterPrereqs(t)
	unlock, err := localcluster.Lock(testContextFor(t, localcluster.LockWait))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	ctx := testContextFor(t, 10*time.Minute)
	if raw, err := os.ReadFile("/run/nodevirt-cluster"); err == nil {
		if c, err := localcluster.Load(strings.TrimSpace(string(raw))); err == nil {
			t.Logf("reusing the local cluster in %s", c.Dir)
			for _, n := range c.Nodes {
				cmd := exec.CommandContext(ctx, n.CTR, "--address", n.Containerd, "-n", "k8s.io", "images", "import", filepath.Join(out, "images", "probe.tar"))
				if b, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("import probe image into %s: %v: %s", n.Name, err, b)
				}
			}
			return c
		}
	}
	// A short path: the kubelet's device-plugin sockets live under it.
	dir, err := os.MkdirTemp("/var/tmp", "nvd-")
	if err != nil {
		t.Fatal(err)
	}
	c, err := localcluster.Up(ctx, localcluster.Config{Dir: dir, Out: out, Log: testenv.LogWriter(t)})
	t.Cleanup(func() {
		if _, statErr := os.Stat(filepath.Join(dir, "cluster.env")); statErr == nil {
			down := c
			if down == nil {
				down, _ = localcluster.Load(dir)
			}
			if down != nil {
				if err := down.Down(context.Background()); err != nil {
					t.Errorf("cluster down: %v", err)
				}
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// requireClusterPrereqs returns the artifacts directory, or skips (fails
// with CI=true) without root, the Kubernetes binaries or the images.
func requireClusterPrereqs(t *testing.T) string {
	t.Helper()
	testenv.Require(t, os.Geteuid() == 0, "root (the local cluster)", "test-devices` as root, or `make cluster-up")
	out, err := localcluster.OutDir()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range []string{"k8s/bin/kubelet", "k8s/bin/kubectl", "k8s/bin/kube-apiserver", "images/pause.tar", "images/probe.tar"} {
		files = append(files, filepath.Join(out, f))
	}
	testenv.RequireFiles(t, "test-devices", files...)
	return out
}

func testContextFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// kubectl runs kubectl with stdin (may be nil) and fails the test on error.
func kubectl(t *testing.T, ctx context.Context, c *localcluster.Cluster, stdin io.Reader, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(ctx, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
