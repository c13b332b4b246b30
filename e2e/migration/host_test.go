package migration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Processes are found from the host: every node of the local cluster runs
// its pods under its own cgroup root (/<node name>, hack/cluster), so a
// process's node is the first element of its cgroup path.

// qemuProc is a live QEMU process of a VMI and the node it runs on.
type qemuProc struct {
	pid  int
	node string
}

// qemuProcs lists the live QEMU processes of VMI name (QEMU runs with
// -name guest=<namespace>_<name>,...) on any node.
func (s *suite) qemuProcs(name string) []qemuProc {
	want := "guest=" + namespace + "_" + name + ","
	var found []qemuProc
	for _, pid := range pids() {
		args := cmdline(pid)
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "qemu-system") || !localcluster.ProcessAlive(pid) {
			continue
		}
		for _, a := range args {
			if strings.HasPrefix(a, want) {
				found = append(found, qemuProc{pid: pid, node: s.processNode(pid)})
				break
			}
		}
	}
	return found
}

// processNode is the cluster node whose cgroup root holds pid ("" when
// none does).
func (s *suite) processNode(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controllers:/path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		first := strings.SplitN(strings.TrimPrefix(parts[2], "/"), "/", 2)[0]
		for _, n := range s.cluster.Nodes {
			if first == n.Name {
				return n.Name
			}
		}
	}
	return ""
}

func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// agentPod returns the agent pod on node.
func (s *suite) agentPod(t *testing.T, node string) corev1.Pod {
	t.Helper()
	return localcluster.AgentPod(t, s.kube, node)
}

// agentHostPid finds the host pid of the agent container of pod: the
// process whose cgroup path names the container's ID and whose command is
// nodevirt-agent.
func agentHostPid(t *testing.T, pod corev1.Pod) int {
	t.Helper()
	var id string
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == "agent" {
			_, id, _ = strings.Cut(cs.ContainerID, "://")
		}
	}
	if id == "" {
		t.Fatalf("agent pod %s: no container ID in its status", pod.Name)
	}
	for _, pid := range pids() {
		args := cmdline(pid)
		if len(args) == 0 || filepath.Base(args[0]) != "nodevirt-agent" {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil && strings.Contains(string(b), id) {
			return pid
		}
	}
	t.Fatalf("agent pod %s: no nodevirt-agent process in container %s", pod.Name, id)
	return 0
}

// killAgent SIGKILLs the agent process on node (its host pid, not a pod
// deletion), waits for it to die and returns a function that waits until
// the kubelet has restarted it and it is ready again.
func (s *suite) killAgent(t *testing.T, node string) (waitBack func()) {
	t.Helper()
	pod := s.agentPod(t, node)
	restarts := int32(0)
	for _, cs := range pod.Status.ContainerStatuses {
		restarts += cs.RestartCount
	}
	pid := agentHostPid(t, pod)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL agent %d on %s: %v", pid, node, err)
	}
	killed := time.Now()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("agent %d on %s to die", pid, node), func() bool { return !localcluster.ProcessAlive(pid) })
	t.Logf("SIGKILLed the agent on %s (host pid %d, pod %s)", node, pid, pod.Name)
	return func() {
		t.Helper()
		testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("the agent on %s restarted and ready", node), func() error {
			p := s.agentPod(t, node)
			var n int32
			for _, cs := range p.Status.ContainerStatuses {
				n += cs.RestartCount
			}
			if n <= restarts && p.UID == pod.UID {
				return fmt.Errorf("agent pod %s restart count %d, not restarted yet", p.Name, n)
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("agent pod %s not ready", p.Name)
		})
		t.Logf("agent on %s back %v after the SIGKILL", node, time.Since(killed).Round(100*time.Millisecond))
	}
}
