package acceptance

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// Scenario 12: invalid VMs are refused by kubectl apply with a message
// naming the field, and nothing is created.
func testBadInput(t *testing.T, s *suite) {
	long := strings.Repeat("a", 64)
	tests := []struct {
		name  string
		edits []string
		field string // the message must name it
	}{{
		name:  "MissingVolume",
		edits: []string{"- name: cloudinit\n            disk:", "- name: nosuchvolume\n            disk:"},
		field: "disks",
	}, {
		name:  "TwoBindings",
		edits: []string{"masquerade: {}", "masquerade: {}\n            bridge: {}"},
		field: "interfaces",
	}, {
		name:  "BadMemory",
		edits: []string{"guest: 128Mi", `guest: "abc"`},
		field: "memory",
	}, {
		name:  "NameTooLong",
		edits: []string{"name: bad-input", "name: " + long},
		field: "name",
	}, {
		name:  "UnsupportedField",
		edits: []string{"cores: 1", "cores: 1\n          realtime: {}"},
		field: "realtime",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := s.example(t, "vm.yaml", "bad-input", tt.edits...)
			out, err := s.kubectlErr(m, "apply", "-n", namespace, "-f", "-")
			if err == nil {
				s.kubectlErr(nil, "delete", "-n", namespace, "vm", "bad-input", long, "--ignore-not-found")
				t.Fatalf("kubectl apply accepted it: %s", out)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("kubectl apply error does not name %q: %v", tt.field, err)
			}
			t.Logf("refused: %v", err)
		})
	}
	vms, err := s.virt.KubevirtV1().VirtualMachines(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms.Items {
		if vm.Name == "bad-input" || vm.Name == long {
			t.Errorf("VM %s was created", vm.Name)
		}
	}
}

// Scenario 8: SIGKILL of the node agent (its host pid, kill -9), ten times
// in a row: running VMs keep
// running (same QEMU, guest uptime continues), no VMI changes phase, and
// pause works within 5 s of each restart.
func testAgentRestart(t *testing.T, s *suite) {
	const name = "survivor"
	vmi := s.startVMI(t, name)
	defer s.deleteVMI(t, name)
	pid := waitQEMU(t, name, 10*time.Second)
	w := s.watchVMI(t, vmi)
	pod := s.launcherPod(t, vmi)
	s.waitSerial(t, pod, "NODEVIRT-GUEST-GW-", 60*time.Second) // DHCP is served by the agent
	for i := 1; i <= 10; i++ {
		old := s.agentPod(t, vmi.Status.NodeName)
		// A real SIGKILL of the agent's host process (no SIGTERM, no
		// goodbye), then the dead pod is deleted so the DaemonSet starts a
		// fresh one at once: the kubelet's restart of the container would
		// back off for minutes after ten kills.
		sigkillAgent(t, old)
		s.kubectl(t, nil, "delete", "pod", "-n", "nodevirt", old.Name, "--grace-period=0", "--force", "--wait=false")
		s.waitAgentReady(t, vmi.Status.NodeName, old.UID, 90*time.Second)
		ready := time.Now()
		if got := qemuPid(name); got != pid {
			t.Fatalf("restart %d: QEMU pid %d, want %d (still running)", i, got, pid)
		}
		// Pause works within 5 s of the restart.
		testenv.Eventually(t, time.Until(ready.Add(5*time.Second)), fmt.Sprintf("restart %d: pause to succeed within 5 s of the agent being ready", i),
			func() error { return s.vmiAction(t, vmi, "pause") })
		s.waitVMI(t, name, time.Until(ready.Add(5*time.Second))+time.Second, "Paused within 5 s of the restart", pausedState(true))
		t.Logf("restart %d: paused %v after the new agent was ready", i, time.Since(ready).Round(10*time.Millisecond))
		if err := s.vmiAction(t, vmi, "unpause"); err != nil {
			t.Fatal(err)
		}
		s.waitVMI(t, name, 5*time.Second, "unpaused", pausedState(false))
	}
	select {
	case p := <-w.phases:
		if p != v1.Running {
			t.Errorf("VMI %s changed phase to %s during the agent restarts", name, p)
		}
	default:
	}
	cur := s.waitVMI(t, name, 30*time.Second, "Running and Ready", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.Phase == v1.Running && condition(v, v1.VirtualMachineInstanceReady) == "True"
	})
	if cur.UID != vmi.UID {
		t.Errorf("VMI replaced: %s -> %s", vmi.UID, cur.UID)
	}
	// The guest kept running: its console is still the same boot.
	if n := strings.Count(readFile(s.serialLog(t, pod)), "NODEVIRT-GUEST-READY"); n != 1 {
		t.Errorf("guest ready marker seen %d times, want 1 (the guest rebooted?)", n)
	}
}

// sigkillAgent sends SIGKILL to the agent process of pod (its host pid)
// and waits until it is gone, so nothing of it runs when it returns.
func sigkillAgent(t *testing.T, pod corev1.Pod) int {
	t.Helper()
	pid, err := localcluster.PodProcess(string(pod.UID), "nodevirt-agent")
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.SIGKILL(string(pod.UID), pid, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return pid
}

// agentPod returns the running agent pod on node.
func (s *suite) agentPod(t *testing.T, node string) corev1.Pod {
	t.Helper()
	return localcluster.AgentPod(t, s.kube, node)
}

// waitAgentReady waits for an agent pod on node other than old that is Ready.
func (s *suite) waitAgentReady(t *testing.T, node string, old any, timeout time.Duration) {
	t.Helper()
	testenv.Eventually(t, timeout, fmt.Sprintf("a new ready agent pod on %s (other than %v)", node, old), func() error {
		pods, err := s.kube.CoreV1().Pods("nodevirt").List(t.Context(), metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=nodevirt-agent",
			FieldSelector: "spec.nodeName=" + node,
		})
		if err != nil {
			return fmt.Errorf("list agent pods: %w", err)
		}
		var seen []string
		for _, p := range pods.Items {
			if fmt.Sprint(p.UID) != fmt.Sprint(old) && p.Status.Phase == corev1.PodRunning && podReady(p) {
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s (uid %s, phase %s, ready %t)", p.Name, p.UID, p.Status.Phase, podReady(p)))
		}
		return fmt.Errorf("agent pods on %s: %v", node, seen)
	})
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Scenario 13: with the agent stopped silently (SIGSTOP, then the
// kubelet's SIGKILL: it never says goodbye) the node gets
// kubevirt.io/schedulable=false because the controller saw its heartbeat
// grow older than the configured threshold (30 s on the local cluster:
// the mark must come after it, with a heartbeat from before the stop), and
// its VMIs
// fail with reason NodeUnresponsive; with the agent back the node is
// schedulable again.
//
// The node controller (cluster/node) fails a silent node's VMIs only once
// their launcher pods are gone or the node is NotReady, as KubeVirt does: a
// VMI whose QEMU may still run is never failed (and restarted elsewhere) on
// heartbeat age alone. So after the threshold the scenario deletes the
// launcher pod, as a node failure would take it, and expects
// NodeUnresponsive rather than the ordinary pod-gone failure.
func testHeartbeat(t *testing.T, s *suite) {
	const name = "orphan"
	vmi := s.startVMI(t, name)
	node := vmi.Status.NodeName
	pod := s.launcherPod(t, vmi)
	// The guest's DHCP server lives in the agent: let the guest finish its
	// network setup first.
	s.waitSerial(t, pod, "NODEVIRT-GUEST-GW-", 60*time.Second)
	agent := s.agentPod(t, node)
	pid, err := localcluster.PodProcess(string(agent.UID), "nodevirt-agent")
	if err != nil {
		t.Fatal(err)
	}
	// The agent stops silently: SIGSTOP freezes it (no heartbeat, no
	// goodbye, and the kubelet sees a running container). Then the
	// DaemonSet's pods are kept off every node, so the frozen pod is
	// deleted: the SIGTERM stays pending in the stopped process and the
	// kubelet's SIGKILL after the grace period ends it without a word.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP agent pid %d: %v", pid, err)
	}
	stopped := time.Now()
	s.kubectl(t, nil, "patch", "daemonset", "-n", "nodevirt", "nodevirt-agent", "--type=merge",
		"-p", `{"spec":{"template":{"spec":{"nodeSelector":{"nodevirt.io/e2e-no-agent":"true"}}}}}`)
	restored := false
	restore := func() {
		if !restored {
			restored = true
			s.kubectl(t, nil, "patch", "daemonset", "-n", "nodevirt", "nodevirt-agent", "--type=json",
				"-p", `[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]`)
		}
	}
	defer restore()
	defer func() {
		// If the test ends before the kubelet killed it, the agent runs on.
		if ps, err := localcluster.PodProcesses(string(agent.UID)); err == nil {
			for _, p := range ps {
				if p.PID == pid {
					_ = syscall.Kill(pid, syscall.SIGCONT)
				}
			}
		}
	}()
	n := s.waitNode(t, node, "unschedulable", 3*time.Minute, func(n *corev1.Node) bool {
		return n.Labels["kubevirt.io/schedulable"] == "false"
	})
	t.Logf("node %s unschedulable %v after the agent stopped", node, time.Since(stopped).Round(100*time.Millisecond))
	// The controller noticed the stale heartbeat: the last one predates the
	// stop and was older than the threshold when the mark was seen (the
	// agent's goodbye would have come within seconds, with a fresh one).
	hb, err := time.Parse(time.RFC3339, n.Annotations["kubevirt.io/heartbeat"])
	switch {
	case err != nil:
		t.Errorf("heartbeat annotation %q: %v", n.Annotations["kubevirt.io/heartbeat"], err)
	case hb.After(stopped):
		t.Errorf("heartbeat %v after the agent stopped at %v", hb, stopped)
	case time.Since(hb) < heartbeatThreshold:
		t.Errorf("node unschedulable with a heartbeat %v old, under the %v threshold: not the stale-heartbeat path", time.Since(hb), heartbeatThreshold)
	}
	if v := s.waitVMI(t, name, time.Second, "present", func(*v1.VirtualMachineInstance) bool { return true }); v.Status.Phase.IsFinal() {
		t.Errorf("VMI %s failed while its pod still ran: %s", name, statusLine(v))
	}
	s.kubectl(t, nil, "delete", "pod", "-n", namespace, pod.Name, "--grace-period=0", "--force", "--wait=false")
	vmi = s.waitVMI(t, name, 90*time.Second, "Failed as NodeUnresponsive", func(v *v1.VirtualMachineInstance) bool {
		return v.Status.Phase == v1.Failed && v.Status.Reason == "NodeUnresponsive"
	})
	t.Logf("VMI Failed (%s) %v after the agent stopped", vmi.Status.Reason, time.Since(stopped).Round(time.Second))
	restore()
	s.waitNode(t, node, "schedulable", 90*time.Second, func(n *corev1.Node) bool {
		return n.Labels["kubevirt.io/schedulable"] == "true"
	})
	s.deleteVMI(t, name)
}

// heartbeatThreshold is the controller's in deploy/local
// (controller-config.yaml heartbeatThreshold).
const heartbeatThreshold = 30 * time.Second

func (s *suite) waitNode(t *testing.T, name, what string, timeout time.Duration, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	testenv.Eventually(t, timeout, fmt.Sprintf("node %s %s", name, what), func() error {
		n, err := s.kube.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s: %w", name, err)
		}
		if !cond(n) {
			return fmt.Errorf("node %s not %s: labels %v", name, what, n.Labels)
		}
		node = n
		return nil
	})
	return node
}

// Scenario 4: masquerade. The guest's HTTP server on the declared port 80
// answers at the pod IP from the node; the undeclared 8080 does not; the
// guest reaches its gateway.
func testMasquerade(t *testing.T, s *suite) {
	const name = "masq"
	s.apply(t, s.vmManifest(t, name, "Always", ""))
	defer s.deleteVM(t, name)
	vmi := s.waitVMI(t, name, 60*time.Second, "Running", phaseIs(v1.Running))
	pod := s.launcherPod(t, vmi)
	s.waitSerial(t, pod, "NODEVIRT-GUEST-DHCP ip=", 90*time.Second)
	if gw := s.waitSerial(t, pod, "NODEVIRT-GUEST-GW-", 60*time.Second); gw != "NODEVIRT-GUEST-GW-OK" {
		t.Errorf("guest gateway check: %s", gw)
	}
	pod = s.launcherPod(t, vmi)
	ip := pod.Status.PodIP
	if ip == "" {
		t.Fatalf("pod %s has no IP", pod.Name)
	}
	body := httpGetEventually(t, "http://"+net.JoinHostPort(ip, "80")+"/", 60*time.Second)
	if !strings.HasPrefix(body, "nodevirt-guest") {
		t.Errorf("GET pod IP:80 = %q, want nodevirt-guest <hostname>", body)
	}
	c := http.Client{Timeout: 3 * time.Second}
	if resp, err := c.Get("http://" + net.JoinHostPort(ip, "8080") + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("undeclared port 8080 answered at the pod IP: %s", resp.Status)
	}
}

// httpGetEventually GETs url until it answers 200 and returns the body.
func httpGetEventually(t *testing.T, url string, timeout time.Duration) string {
	t.Helper()
	c := http.Client{Timeout: 3 * time.Second}
	var body string
	testenv.Eventually(t, timeout, fmt.Sprintf("GET %s to answer 200", url), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("GET %s: %s: read body: %w", url, resp.Status, err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		body = strings.TrimSpace(string(b))
		return nil
	})
	return body
}

// readFile returns the file's content, "" when it cannot be read.
func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
