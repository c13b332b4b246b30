package acceptance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
)

// The node API (docs/node-api.md) on the agent's unix socket, which lives
// next to its store in the node's directory on the local cluster
// (deploy/local/agent-daemonset.yaml).

// agentSocket is the node API socket of node.
func (s *suite) agentSocket(t *testing.T, node string) string {
	t.Helper()
	return filepath.Join(s.nodeDir(t, node), "nodevirt", "agent.sock")
}

// agentDB is the agent's bbolt file on node.
func (s *suite) agentDB(t *testing.T, node string) string {
	t.Helper()
	return filepath.Join(s.nodeDir(t, node), "nodevirt", "agent.db")
}

func (s *suite) nodeDir(t *testing.T, node string) string {
	t.Helper()
	for _, n := range s.cluster.Nodes {
		if n.Name == node {
			return n.Dir
		}
	}
	t.Fatalf("node %q is not a cluster node", node)
	return ""
}

// nodeAPI sends one request to the node API of node and returns the status
// code and body.
func (s *suite) nodeAPI(t *testing.T, node, method, path string, body any) (int, []byte, error) {
	t.Helper()
	sock := s.agentSocket(t, node)
	c := http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}},
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://node"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// vmiAction PUTs a public action (pause, unpause) for VMI name.
func (s *suite) vmiAction(t *testing.T, vmi *v1.VirtualMachineInstance, action string) error {
	t.Helper()
	code, body, err := s.nodeAPI(t, vmi.Status.NodeName, http.MethodPut,
		fmt.Sprintf("/v1/namespaces/%s/virtualmachineinstances/%s/%s", namespace, vmi.Name, action), nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", action, vmi.Name, err)
	}
	if code/100 != 2 {
		return fmt.Errorf("%s %s: HTTP %d: %s", action, vmi.Name, code, body)
	}
	return nil
}

// guestUptime reads /proc/uptime in the guest through the guest agent's
// guest-exec.
func (s *suite) guestUptime(t *testing.T, vmi *v1.VirtualMachineInstance) float64 {
	t.Helper()
	_, out := s.guestExec(t, vmi, 10*time.Second, "/bin/cat", "/proc/uptime")
	f := strings.Fields(out)
	if len(f) == 0 {
		t.Fatalf("guest /proc/uptime: %q", out)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("guest /proc/uptime %q: %v", out, err)
	}
	return up
}

// guestExec runs path with args in the guest through the guest agent's
// guest-exec (the node API's QGA passthrough), waits up to timeout for it
// to exit and returns its exit code and standard output.
func (s *suite) guestExec(t *testing.T, vmi *v1.VirtualMachineInstance, timeout time.Duration, path string, args ...string) (int, string) {
	t.Helper()
	api := "/nodectl/v1/agent?vmi=" + namespace + "/" + vmi.Name
	var started struct {
		Return struct {
			PID int `json:"pid"`
		} `json:"return"`
	}
	code, body, err := s.nodeAPI(t, vmi.Status.NodeName, http.MethodPost, api, map[string]any{
		"execute":   "guest-exec",
		"arguments": map[string]any{"path": path, "arg": args, "capture-output": true},
	})
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &started) != nil {
		t.Fatalf("guest-exec %s in %s: %v HTTP %d %s", path, vmi.Name, err, code, body)
	}
	var exitCode int
	var output string
	testenv.Eventually(t, timeout, fmt.Sprintf("guest-exec %s in %s to finish", path, vmi.Name), func() bool {
		var st struct {
			Return struct {
				Exited   bool   `json:"exited"`
				ExitCode int    `json:"exitcode"`
				OutData  string `json:"out-data"`
			} `json:"return"`
		}
		code, body, err := s.nodeAPI(t, vmi.Status.NodeName, http.MethodPost, api, map[string]any{
			"execute": "guest-exec-status", "arguments": map[string]any{"pid": started.Return.PID},
		})
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &st) != nil {
			t.Fatalf("guest-exec-status in %s: %v HTTP %d %s", vmi.Name, err, code, body)
		}
		if !st.Return.Exited {
			return false
		}
		out, err := base64.StdEncoding.DecodeString(st.Return.OutData)
		if err != nil {
			t.Fatalf("guest-exec output %q: %v", st.Return.OutData, err)
		}
		exitCode, output = st.Return.ExitCode, string(out)
		return true
	})
	return exitCode, output
}

// pausedState is the VMI's Paused and Ready conditions.
func pausedState(paused bool) func(*v1.VirtualMachineInstance) bool {
	want, ready := "True", "False"
	if !paused {
		want, ready = "False", "True"
	}
	return func(v *v1.VirtualMachineInstance) bool {
		p := string(condition(v, v1.VirtualMachineInstancePaused))
		if p == "" {
			p = "False"
		}
		return v.Status.Phase == v1.Running && p == want && string(condition(v, v1.VirtualMachineInstanceReady)) == ready
	}
}

// Scenario 5: pause shows Paused=True and Ready=False within 2 s, the guest
// clock stops while paused, unpause restores Ready=True.
func testPause(t *testing.T, s *suite) {
	const name = "pauser"
	const pauseFor = 5 * time.Second
	vmi := s.startVMI(t, name)
	defer s.deleteVMI(t, name)
	s.waitVMI(t, name, 60*time.Second, "AgentConnected", func(v *v1.VirtualMachineInstance) bool {
		return condition(v, v1.VirtualMachineInstanceAgentConnected) == "True"
	})
	up0, wall0 := s.guestUptime(t, vmi), time.Now()

	paused := time.Now()
	if err := s.vmiAction(t, vmi, "pause"); err != nil {
		t.Fatal(err)
	}
	s.waitVMI(t, name, 2*time.Second, "Paused=True Ready=False within 2 s", pausedState(true))
	t.Logf("Paused=True, Ready=False %v after the pause request", time.Since(paused).Round(10*time.Millisecond))

	// The pause under test lasts pauseFor; the guest must not see it.
	time.Sleep(time.Until(paused.Add(pauseFor)))
	unpaused := time.Now()
	if err := s.vmiAction(t, vmi, "unpause"); err != nil {
		t.Fatal(err)
	}
	s.waitVMI(t, name, 5*time.Second, "Ready=True after unpause", pausedState(false))
	t.Logf("Ready=True %v after the unpause request", time.Since(unpaused).Round(10*time.Millisecond))

	up1, wall1 := s.guestUptime(t, vmi), time.Now()
	gap := wall1.Sub(wall0).Seconds() - (up1 - up0)
	t.Logf("guest uptime advanced %.2f s over %.2f s of wall time (gap %.2f s, paused %v)", up1-up0, wall1.Sub(wall0).Seconds(), gap, pauseFor)
	if gap < pauseFor.Seconds()-1 {
		t.Errorf("guest clock gap %.2f s, want >= %.2f s (the pause length - 1 s)", gap, pauseFor.Seconds()-1)
	}
}

// Scenario 11: startStrategy Paused runs the VMI paused (no boot); unpause
// boots the guest.
func testStartPaused(t *testing.T, s *suite) {
	const name = "startpaused"
	s.apply(t, s.vmiManifest(t, name, "spec:\n  domain:", "spec:\n  startStrategy: Paused\n  domain:"))
	defer s.deleteVMI(t, name)
	vmi := s.waitVMI(t, name, 60*time.Second, "Running with Paused=True", pausedState(true))
	pod := s.launcherPod(t, vmi)
	if log := readFile(s.serialLog(t, pod)); strings.Contains(log, "NODEVIRT-GUEST-READY") {
		t.Fatalf("the guest booted before unpause:\n%s", tail(log, 10))
	}
	if err := s.vmiAction(t, vmi, "unpause"); err != nil {
		t.Fatal(err)
	}
	s.waitVMI(t, name, 10*time.Second, "Ready after unpause", pausedState(false))
	s.waitSerial(t, pod, "NODEVIRT-GUEST-READY", 60*time.Second)
}

// nodectl runs the nodectl binary (built once per suite) against node's
// agent socket and store.
func (s *suite) nodectl(t *testing.T, node string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	if s.nodectlBin == "" {
		// Built once for the suite, into the build output (a subtest's
		// temporary directory would go with the subtest).
		bin := filepath.Join(s.root, "_output", "e2e", "nodectl")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/nodectl")
		cmd.Dir = s.root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build nodectl: %v\n%s", err, out)
		}
		s.nodectlBin = bin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	cmd := exec.CommandContext(ctx, s.nodectlBin,
		append([]string{"--socket", s.agentSocket(t, node), "--db", s.agentDB(t, node)}, args...)...)
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// Scenario 14: nodectl on the node lists the VMs, shows a record and its
// timeline, runs QMP query-status; with the agent stopped it still lists
// and shows, read-only.
func testNodectl(t *testing.T, s *suite) {
	const name = "inspected"
	vmi := s.startVMI(t, name)
	defer s.deleteVMI(t, name)
	node, ref := vmi.Status.NodeName, namespace+"/"+name
	check := func(what string, want string, args ...string) string {
		t.Helper()
		out, errOut, err := s.nodectl(t, node, args...)
		if err != nil {
			t.Fatalf("nodectl %s: %v\n%s", strings.Join(args, " "), err, errOut)
		}
		if !strings.Contains(out, want) {
			t.Errorf("nodectl %s (%s) does not contain %q:\n%s", strings.Join(args, " "), what, want, out)
		}
		return errOut
	}
	check("list", name, "list")
	check("record", string(vmi.UID), "show", ref)
	check("timeline", "\n", "timeline", ref)
	check("QMP", "running", "qmp", ref, `{"execute":"query-status"}`)

	// Agent stopped: list and show read the store read-only.
	s.stopAgent(t)
	defer s.startAgent(t, node)
	if errOut := check("list, agent down", name, "list"); !strings.Contains(errOut, "read-only") {
		t.Errorf("nodectl list with the agent down does not say read-only: %q", errOut)
	}
	check("record, agent down", string(vmi.UID), "show", ref)
}

// stopAgent keeps the agent DaemonSet's pods off every node and waits until
// none is left.
func (s *suite) stopAgent(t *testing.T) {
	t.Helper()
	s.kubectl(t, nil, "patch", "daemonset", "-n", "nodevirt", "nodevirt-agent", "--type=merge",
		"-p", `{"spec":{"template":{"spec":{"nodeSelector":{"nodevirt.io/e2e-no-agent":"true"}}}}}`)
	s.kubectl(t, nil, "wait", "-n", "nodevirt", "--for=delete", "pod", "-l", "app.kubernetes.io/name=nodevirt-agent", "--timeout=60s")
}

// startAgent undoes stopAgent and waits for a ready agent on node.
func (s *suite) startAgent(t *testing.T, node string) {
	t.Helper()
	s.kubectl(t, nil, "patch", "daemonset", "-n", "nodevirt", "nodevirt-agent", "--type=json",
		"-p", `[{"op":"remove","path":"/spec/template/spec/nodeSelector"}]`)
	s.waitAgentReady(t, node, "", 90*time.Second)
}
