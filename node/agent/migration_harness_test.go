package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/podfs"
)

// migNode is one node of the migration test: its own kubelet root, bbolt
// file, certificate and agent process; the first node reuses the
// harness's directories (so harness.createVM places VMs on it).
type migNode struct {
	h       *harness
	name    string
	root    string
	db      string
	log     string
	pki     string
	socket  string
	migAddr string

	agent agentProc
}

func (h *harness) migNode(t *testing.T, name string) *migNode {
	t.Helper()
	n := &migNode{h: h, name: name, migAddr: testenv.FreeLoopbackAddr(t)}
	if name == testNode {
		n.root, n.db, n.log, n.pki, n.socket = h.root, h.db, h.agentLog, filepath.Join(h.caDir, "pki"), h.apiSocket
	} else {
		dir := t.TempDir()
		n.root, n.db, n.log = filepath.Join(dir, "kubelet"), filepath.Join(dir, "agent.db"), filepath.Join(dir, "agent.log")
		n.pki, n.socket = filepath.Join(dir, "pki"), filepath.Join(dir, "agent.sock")
		if err := certrotation.WriteFile(filepath.Join(n.pki, "agent-serving.pem"), h.ca.AgentServing(t, name)); err != nil {
			t.Fatal(err)
		}
		_, err := h.kube.CoreV1().Nodes().Create(h.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("agent %s log tail:\n%s", name, tail(n.log, 60))
			}
		})
	}
	t.Cleanup(n.stop)
	return n
}

// start starts the node's agent with its migration channel.
func (n *migNode) start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(n.h.bin, "nodevirt-agent"),
		"--kubeconfig", n.h.env.Kubeconfig, "--node-name", n.name, "--db", n.db,
		"--kubelet-root", n.root, "--allow-emulation=true", "--log-level=debug",
		"--api-socket", n.socket, "--api-ca-bundle", filepath.Join(n.h.caDir, "ca.crt"), "--api-pki-dir", n.pki,
		"--metrics-addr=", "--device-plugins=false", "--heartbeat=false",
		"--migration-addr", n.migAddr, "--migration-advertise-addr", n.migAddr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.agent.set(cmd)
}

// kill SIGKILLs the node's agent (a real kill: its connections die with it).
func (n *migNode) kill() { n.agent.kill() }

func (n *migNode) stop() { n.agent.stop() }

// logSize is the agent log's current size (an offset for logSays).
func (n *migNode) logSize() int64 {
	fi, err := os.Stat(n.log)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSays reports whether the agent's log after offset off has a line with
// msg and, if set, the attribute key=value.
func (n *migNode) logSays(off int64, msg, key, value string) bool {
	b, err := os.ReadFile(n.log)
	if err != nil || int64(len(b)) < off {
		return false
	}
	b = b[off:]
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, `"msg":"`+msg+`"`) && (key == "" || strings.Contains(l, fmt.Sprintf("%q:%q", key, value))) {
			return true
		}
	}
	return false
}

// logInt returns the integer attribute key of the last line with msg.
func (n *migNode) logInt(msg, key string) int64 {
	b, _ := os.ReadFile(n.log)
	var v int64 = -1
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, `"msg":"`+msg+`"`) {
			continue
		}
		_, rest, ok := strings.Cut(l, `"`+key+`":`)
		if !ok {
			continue
		}
		end := strings.IndexAny(rest, ",}")
		if x, err := strconv.ParseInt(rest[:end], 10, 64); err == nil {
			v = x
		}
	}
	return v
}

// targetPod plays the migration controller and the target node's kubelet:
// a launcher pod for v on n labelled with the migration, its pod
// directory, netns and launcher, and a serial console listener.
func (n *migNode) targetPod(t *testing.T, v *vm, migUID string) *vm {
	t.Helper()
	h := n.h
	pod := testPod(v.get())
	pod.Spec.NodeName = n.name
	pod.Labels[v1.MigrationJobUIDLabel] = migUID
	pod, err := h.kube.CoreV1().Pods(h.ns).Create(h.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create target pod of %s: %v", v.name, err)
	}
	tv := &vm{h: h, name: v.name + "@" + n.name, podName: pod.Name}
	if tv.pod, err = podfs.New(n.root, string(pod.UID)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{tv.pod.SocketsDir(), filepath.Join(tv.pod.PrivateDir(), "kernel")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for src, dst := range map[string]string{"vmlinux": "kernel", "initrd.img": "initrd"} {
		if err := os.Symlink(filepath.Join(h.guest, src), filepath.Join(tv.pod.PrivateDir(), "kernel", dst)); err != nil {
			t.Fatal(err)
		}
	}
	if v.netns != "" {
		tv.netns = "nvt-" + string(pod.UID)[:8]
		makePodNetns(t, tv.netns)
	}
	tv.serial = watchSerial(t, tv.pod.Socket(podfs.SerialSocket))
	tv.startLauncher(t)
	return tv
}

// migration is one migration the test drives as the controller would.
type migration struct {
	uid    string
	source *migNode
	target *migNode
	vm     *vm // on the source
	tgt    *vm // the target pod
}

// begin writes migrationState and the target label (PreparingTarget).
func (m *migration) begin(t *testing.T, cfg *v1.MigrationConfiguration) {
	t.Helper()
	m.vm.updateStatus(t, func(s *v1.VirtualMachineInstanceStatus) {
		s.MigrationState = &v1.VirtualMachineInstanceMigrationState{
			MigrationUID: types.UID(m.uid), SourceNode: m.source.name, TargetNode: m.target.name,
			SourcePod: m.vm.podName, TargetPod: m.tgt.podName, MigrationConfiguration: cfg,
		}
	})
	m.vm.updateLabels(t, func(l map[string]string) { l[v1.MigrationTargetNodeNameLabel] = m.target.name })
}

// state is the VMI's migrationState (nil when none).
func (m *migration) state() *v1.VirtualMachineInstanceMigrationState {
	vmi := m.vm.get()
	if vmi == nil || vmi.Status.MigrationState == nil || string(vmi.Status.MigrationState.MigrationUID) != m.uid {
		return nil
	}
	return vmi.Status.MigrationState
}

// waitState waits until cond holds for the migration's state.
func (m *migration) waitState(t *testing.T, timeout time.Duration, what string, cond func(*v1.VirtualMachineInstanceMigrationState) bool) *v1.VirtualMachineInstanceMigrationState {
	t.Helper()
	var ms *v1.VirtualMachineInstanceMigrationState
	testenv.Eventually(t, timeout, what, func() bool {
		ms = m.state()
		return ms != nil && cond(ms)
	})
	return ms
}

// handoff hands the VMI to the target node (Succeeded).
func (m *migration) handoff(t *testing.T) {
	t.Helper()
	m.vm.updateStatus(t, func(s *v1.VirtualMachineInstanceStatus) { s.NodeName = m.target.name })
	m.vm.updateLabels(t, func(l map[string]string) {
		l[v1.NodeNameLabel] = m.target.name
		delete(l, v1.MigrationTargetNodeNameLabel)
	})
}

// cleanupFailed removes the target label and the target pod (Failed).
func (m *migration) cleanupFailed(t *testing.T) {
	t.Helper()
	m.vm.updateLabels(t, func(l map[string]string) { delete(l, v1.MigrationTargetNodeNameLabel) })
	_ = m.vm.h.kube.CoreV1().Pods(m.vm.h.ns).Delete(m.vm.h.ctx, m.tgt.podName, metav1.DeleteOptions{})
}

func newMigrationUID() string { return string(uuid.NewUUID()) }

// updateStatus changes the VMI's status as the controller would, retrying
// on conflicts with the agents' writes.
func (v *vm) updateStatus(t *testing.T, fn func(*v1.VirtualMachineInstanceStatus)) {
	t.Helper()
	c := v.h.virt.KubevirtV1().VirtualMachineInstances(v.h.ns)
	for range 20 {
		vmi, err := c.Get(context.Background(), v.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fn(&vmi.Status)
		if _, err = c.UpdateStatus(context.Background(), vmi, metav1.UpdateOptions{FieldManager: v1.ManagerMigrationController}); err == nil {
			return
		} else if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatalf("VMI %s: status update conflicts", v.name)
}

// updateLabels changes the VMI's labels, retrying on conflicts.
func (v *vm) updateLabels(t *testing.T, fn func(map[string]string)) {
	t.Helper()
	c := v.h.virt.KubevirtV1().VirtualMachineInstances(v.h.ns)
	for range 20 {
		vmi, err := c.Get(context.Background(), v.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fn(vmi.Labels)
		if _, err = c.Update(context.Background(), vmi, metav1.UpdateOptions{FieldManager: v1.ManagerMigrationController}); err == nil {
			return
		} else if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatalf("VMI %s: label update conflicts", v.name)
}

// qemuExited reports whether the pod's launcher says its QEMU exited (or
// the launcher is gone).
func (v *vm) qemuExited() bool {
	st, err := v.launcherStatus()
	return err != nil || st.State == launcher.StateExited
}

// lastUptime is the guest uptime of the last NODEVIRT-UPTIME line on the
// serial console, -1 when none.
func (s *serialLog) lastUptime() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.lines) - 1; i >= 0; i-- {
		if f := strings.Fields(s.lines[i]); len(f) == 2 && f[0] == "NODEVIRT-UPTIME" {
			if up, err := strconv.ParseFloat(f[1], 64); err == nil {
				return up
			}
		}
	}
	return -1
}

// firstUptime is the guest uptime of the first NODEVIRT-UPTIME line.
func (s *serialLog) firstUptime() float64 {
	l, ok := s.line("NODEVIRT-UPTIME ")
	if !ok {
		return -1
	}
	up, err := strconv.ParseFloat(strings.Fields(l)[1], 64)
	if err != nil {
		return -1
	}
	return up
}

// guestHTTP fetches the guest's HTTP page from inside the pod's netns.
func guestHTTP(netns string) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", netns, "curl", "-sS", "-m", "3", "http://10.0.2.2/").CombinedOutput()
	return string(out), err
}

// waitGuestAgent waits until n's node API reaches v's guest agent
// (guest-ping) and returns how long after since that was.
func (n *migNode) waitGuestAgent(t *testing.T, v *vm, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	c := api.NewClient(n.socket)
	var answered time.Time
	testenv.Eventually(t, timeout, "the guest agent answering through "+n.name+"'s node API", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := c.Agent(ctx, v.h.ns+"/"+v.name, api.Command{Execute: "guest-ping"}); err != nil {
			return err
		}
		answered = time.Now()
		return nil
	})
	return answered.Sub(since)
}
