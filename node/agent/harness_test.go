package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/node/unixsock"
)

const testNode = "node1"

// requireHost checks root and the host tools the integration test needs.
func requireHost(t *testing.T) {
	testenv.Require(t, os.Geteuid() == 0, "the agent integration test needs root (netns, nftables, taps)", "test-agent")
	for _, tool := range []string{"qemu-system-x86_64", "ip", "unshare"} {
		_, err := exec.LookPath(tool)
		testenv.Require(t, err == nil, tool+" is not installed", "guest-deps agent-deps")
	}
}

// harness is one API server, one agent process and the VMs of a test.
type harness struct {
	t        *testing.T
	ctx      context.Context
	env      *apiserver.Env
	virt     versioned.Interface
	kube     kubernetes.Interface
	bin      string // built binaries
	guest    string // guest images
	root     string // fake kubelet root
	db       string
	agentLog string
	ns       string
	// Node API: the unix socket, the CA directory and the mTLS address.
	apiSocket string
	caDir     string // the mounted bundle (ca.crt) and the agent's pki/
	ca        *certrotationtest.CA
	tlsAddr   string
	// metricsAddr is the agent's /metrics endpoint (loopback, free port).
	metricsAddr string

	// agentArgs are extra flags of every agent start.
	agentArgs []string

	agent agentProc
}

func newHarness(t *testing.T) *harness {
	requireHost(t)
	out, err := testenv.OutDir()
	if err != nil {
		t.Fatal(err)
	}
	guest := filepath.Join(out, "guest")
	testenv.RequireFiles(t, "guest-images", filepath.Join(guest, "vmlinux"), filepath.Join(guest, "initrd.img"))
	env := apiserver.Start(t)
	h := &harness{t: t, ctx: context.Background(), env: env, guest: guest, ns: "vms"}
	rc := rest.CopyConfig(env.Config)
	rc.QPS, rc.Burst = 500, 1000 // client-go's 5/s would pace the scale tests
	h.virt = versioned.NewForConfigOrDie(rc)
	h.kube = kubernetes.NewForConfigOrDie(rc)
	dir := t.TempDir()
	if os.Getenv("NODEVIRT_AGENT_TEST_KEEP") != "" {
		// Debugging: keep logs and the store after the test.
		var err error
		if dir, err = os.MkdirTemp("", "agent-test-"); err != nil {
			t.Fatal(err)
		}
		t.Logf("keeping %s", dir)
	}
	h.bin, h.root, h.db = filepath.Join(dir, "bin"), filepath.Join(dir, "kubelet"), filepath.Join(dir, "agent.db")
	h.agentLog = filepath.Join(dir, "agent.log")
	h.apiSocket, h.caDir = filepath.Join(dir, "agent.sock"), filepath.Join(dir, "ca")
	h.tlsAddr, h.ca = writeTestCA(t, h.caDir)
	h.metricsAddr = testenv.FreeLoopbackAddr(t)
	h.build()
	if _, err := h.kube.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: h.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.CoreV1().Nodes().Create(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stopAgent)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log tail:\n%s", tail(h.agentLog, 80))
		}
	})
	return h
}

// build compiles the agent and the launcher from this checkout.
func (h *harness) build() {
	root, err := testenv.RepoRoot()
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", h.bin+"/", "./cmd/nodevirt-agent", "./cmd/nodevirt-launcher")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("build: %v\n%s", err, b)
	}
}

// startAgent starts the agent process; its log is appended to agentLog.
func (h *harness) startAgent(t *testing.T) time.Time {
	t.Helper()
	logf, err := os.OpenFile(h.agentLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(h.bin, "nodevirt-agent"),
		"--kubeconfig", h.env.Kubeconfig, "--node-name", testNode, "--db", h.db,
		"--kubelet-root", h.root, "--allow-emulation=true", "--log-level=debug",
		"--api-socket", h.apiSocket, "--api-tls-addr", h.tlsAddr,
		"--api-ca-bundle", filepath.Join(h.caDir, "ca.crt"), "--api-pki-dir", filepath.Join(h.caDir, "pki"),
		"--metrics-addr", h.metricsAddr,
		// No kubelet here; another test's kubelet on this host must not
		// see our device plugins.
		"--device-plugins=false", "--heartbeat=true")
	cmd.Args = append(cmd.Args, h.agentArgs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.agent.set(cmd)
	return start
}

// killAgent SIGKILLs the agent and reaps it.
func (h *harness) killAgent() { h.agent.kill() }

func (h *harness) stopAgent() { h.agent.stop() }

func (h *harness) agentPID() int { return h.agent.pid() }

// vm is one VMI with its pod directory, netns and launcher process.
type vm struct {
	h        *harness
	name     string
	podName  string
	vmi      *v1.VirtualMachineInstance
	pod      podfs.Pod
	netns    string // "" without NIC
	launcher *exec.Cmd
	serial   *serialLog
	created  time.Time     // when it became Scheduled
	exited   chan struct{} // closed when the launcher process is reaped
}

// createVM plays the controller and the kubelet: a Scheduled VMI with the
// finalizer and node label, a Pod object, the pod directory, a netns (with
// a NIC), and the launcher process started in it.
func (h *harness) createVM(t *testing.T, name string, o vmOpts) *vm {
	t.Helper()
	v := h.prepareVM(t, name, o)
	v.schedule(t)
	return v
}

// prepareVM is createVM up to the launcher running, with the VMI not
// scheduled yet (phase unset: the agent leaves it alone).
func (h *harness) prepareVM(t *testing.T, name string, o vmOpts) *vm {
	t.Helper()
	vmi := testVMI(h.ns, name, o)
	var err error
	vmi, err = h.virt.KubevirtV1().VirtualMachineInstances(h.ns).Create(h.ctx, vmi, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create VMI %s: %v", name, err)
	}
	if o.unscheduled {
		vmi.Status = v1.VirtualMachineInstanceStatus{Phase: v1.Scheduling,
			PhaseTransitionTimestamps: []v1.VirtualMachineInstancePhaseTransitionTimestamp{
				{Phase: v1.Pending, PhaseTransitionTimestamp: metav1.Now()},
				{Phase: v1.Scheduling, PhaseTransitionTimestamp: metav1.Now()},
			}}
		if vmi, err = h.virt.KubevirtV1().VirtualMachineInstances(h.ns).UpdateStatus(h.ctx, vmi, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("VMI %s to Scheduling: %v", name, err)
		}
	}
	pod, err := h.kube.CoreV1().Pods(h.ns).Create(h.ctx, testPod(vmi), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod of %s: %v", name, err)
	}
	v := &vm{h: h, name: name, podName: pod.Name}
	v.pod, err = podfs.New(h.root, string(pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{v.pod.SocketsDir(), filepath.Join(v.pod.PrivateDir(), "kernel")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for src, dst := range map[string]string{"vmlinux": "kernel", "initrd.img": "initrd"} {
		if err := os.Symlink(filepath.Join(h.guest, src), filepath.Join(v.pod.PrivateDir(), "kernel", dst)); err != nil {
			t.Fatal(err)
		}
	}
	if o.binding != "" {
		v.netns = "nvt-" + string(vmi.UID)[:8]
		makePodNetns(t, v.netns)
	}
	v.startLauncher(t)
	v.serial = watchSerial(t, v.pod.Socket(podfs.SerialSocket))
	v.vmi = vmi
	return v
}

// makePodNetns creates a netns that looks like a CNI-built pod network:
// eth0 (one end of a veth pair kept inside the netns) with 10.244.0.5/24
// and a default route. It is deleted in t.Cleanup.
func makePodNetns(t *testing.T, name string) {
	t.Helper()
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{
		{"link", "add", "eth0", "type", "veth", "peer", "name", "cni0"},
		{"addr", "add", "10.244.0.5/24", "dev", "eth0"},
		{"addr", "add", "10.244.0.1/24", "dev", "cni0"},
		{"link", "set", "lo", "up"},
		{"link", "set", "cni0", "up"},
		{"link", "set", "eth0", "up"},
		{"route", "add", "default", "via", "10.244.0.1", "dev", "eth0"},
	} {
		run(t, "ip", append([]string{"-n", name}, args...)...)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if b, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
	}
}

// launcherScript mounts the pod's emptyDirs where the launcher pod has
// them, in a private mount namespace (as the container runtime would),
// then execs the launcher.
const launcherScript = `set -e
mount -t tmpfs nodevirt-test /run
mkdir -p /run/nodevirt/sockets /run/nodevirt/private
mount --bind "$1" /run/nodevirt/sockets
mount --bind "$2" /run/nodevirt/private
shift 2
exec "$@"`

// startLauncher starts the launcher like the kubelet would start the
// compute container: in the pod's netns (when it has one) and mount view.
// Its process group (the launcher and QEMU) is killed in t.Cleanup.
func (v *vm) startLauncher(t *testing.T) {
	var argv []string
	if v.netns != "" {
		argv = append(argv, "ip", "netns", "exec", v.netns)
	}
	argv = append(argv, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", launcherScript, "sh", v.pod.SocketsDir(), v.pod.PrivateDir(),
		filepath.Join(v.h.bin, "nodevirt-launcher"), "run",
		"--sockets", "/var/run/nodevirt/sockets", "--private", "/var/run/nodevirt/private")
	logf, err := os.Create(filepath.Join(v.pod.Dir(), "launcher.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	v.launcher = cmd
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("launcher %s log tail:\n%s", v.name, tail(logf.Name(), 30))
		}
	})
	v.exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(v.exited) }()
	t.Cleanup(v.killLauncher)
}

// killLauncher SIGKILLs the launcher's process group (launcher and QEMU)
// and reaps the launcher.
func (v *vm) killLauncher() {
	_ = syscall.Kill(-v.launcher.Process.Pid, syscall.SIGKILL)
	<-v.exited
}

// launcherStatus asks the VM's launcher for its status.
func (v *vm) launcherStatus() (launcher.Status, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var st launcher.Status
	err := unixsock.WithPath(v.pod.Socket(podfs.LauncherSocket), func(p string) error {
		var err error
		st, err = launcher.NewClient(p).Status(ctx)
		return err
	})
	return st, err
}

// dial connects to the unix socket at path, however long.
func dial(ctx context.Context, path string) (net.Conn, error) {
	c, err := unixsock.Dial(ctx, path)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// qemuPID is QEMU's host pid, from SO_PEERCRED on its QMP socket.
func (v *vm) qemuPID(t *testing.T) int {
	t.Helper()
	st, err := v.launcherStatus()
	if err != nil || st.State != launcher.StateRunning {
		t.Fatalf("VM %s: launcher status %+v, %v", v.name, st, err)
	}
	return st.QEMUPid
}

// get returns the VMI from the API (nil when gone).
func (v *vm) get() *v1.VirtualMachineInstance {
	vmi, err := v.h.virt.KubevirtV1().VirtualMachineInstances(v.h.ns).Get(context.Background(), v.name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return vmi
}

// waitPhase waits until the VMI reaches phase.
func (v *vm) waitPhase(t *testing.T, phase v1.VirtualMachineInstancePhase, timeout time.Duration) *v1.VirtualMachineInstance {
	t.Helper()
	var last *v1.VirtualMachineInstance
	testenv.Eventually(t, timeout, fmt.Sprintf("VMI %s phase %s", v.name, phase), func() bool {
		last = v.get()
		return last != nil && last.Status.Phase == phase
	})
	return last
}

// serialLog collects a VM's serial console lines.
type serialLog struct {
	mu    sync.Mutex
	lines []string
	// stop disconnects from the serial socket (it takes one client) and
	// waits until it is closed.
	stop func()
}

// watchSerial connects to the serial socket as soon as QEMU creates it
// (output before a client connects is lost: the chardev has wait=off) and
// collects lines until the test ends.
func watchSerial(t *testing.T, path string) *serialLog {
	s := &serialLog{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stop = func() { cancel(); <-done }
	t.Cleanup(s.stop)
	go func() {
		defer close(done)
		var c net.Conn
		for c == nil {
			var err error
			if c, err = dial(ctx, path); err != nil {
				c = nil
				select {
				case <-ctx.Done():
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
		stop := context.AfterFunc(ctx, func() { c.Close() })
		defer stop()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, strings.TrimRight(sc.Text(), "\r"))
			s.mu.Unlock()
		}
	}()
	return s
}

// line returns the first line starting with prefix.
func (s *serialLog) line(prefix string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

func (s *serialLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// count returns the number of lines starting with prefix.
func (s *serialLog) count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// waitSerial waits for a serial line starting with prefix.
func (v *vm) waitSerial(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	var l string
	start := time.Now()
	for {
		var ok bool
		if l, ok = v.serial.line(prefix); ok {
			return l
		}
		if time.Since(start) > timeout {
			t.Fatalf("VM %s: no %q on the serial console after %v; console:\n%s", v.name, prefix, timeout, v.serial)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// agentLogLines returns the agent's JSON log records with msg after byte
// offset off of the log.
func (h *harness) agentLogLines(off int64, msg string) []map[string]any {
	b, err := os.ReadFile(h.agentLog)
	if err != nil || int64(len(b)) < off {
		return nil
	}
	var out []map[string]any
	for _, l := range strings.Split(string(b[off:]), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (h *harness) agentLogSize() int64 {
	st, err := os.Stat(h.agentLog)
	if err != nil {
		return 0
	}
	return st.Size()
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
