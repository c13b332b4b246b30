package agent_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/certrotation"
	"github.com/nodevirt/nodevirt/cluster/certrotation/certrotationtest"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// TestSurfaces_Integration exercises the node API of a real agent on real
// QEMUs: pause/unpause (and its persistence across agent kills),
// startStrategy Paused, guest data, console and VNC websockets, mutual
// TLS, nodectl, and the pause/unpause latency.
func TestSurfaces_Integration(t *testing.T) {
	h := newHarness(t)
	h.startAgent(t)
	// user-data: the guest keeps its cidata disk mounted, a file system
	// for filesystemlist.
	v := h.createVM(t, "surf", vmOpts{graphics: true, binding: "masquerade", userData: "#!/bin/sh\necho surf\n"})
	sp := h.createVM(t, "startpaused", vmOpts{paused: true})
	sp.serial.stop() // the console test reads this VM's serial port
	c := api.NewClient(h.apiSocket)
	ref := h.ns + "/" + v.name

	v.waitPhase(t, v1.Running, 60*time.Second)
	v.waitSerial(t, "NODEVIRT-GUEST-READY", 90*time.Second)
	v.waitSerial(t, "NODEVIRT-USERDATA-END", 60*time.Second)
	testenv.Eventually(t, 60*time.Second, "guest agent of "+v.name, func() bool {
		return conditionIs(v.get(), v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue)
	})

	t.Run("GuestInterfaces", func(t *testing.T) {
		var got []v1.VirtualMachineInstanceNetworkInterface
		testenv.Eventually(t, 20*time.Second, "guest agent data in status.interfaces", func() bool {
			got = v.get().Status.Interfaces
			return len(got) == 1 && got[0].InfoSource == "domain, guest-agent"
		})
		if got[0].IPAddress != "10.244.0.5" || got[0].InterfaceName != "eth0" {
			t.Errorf("status.interfaces = %+v, want the pod IP (masquerade) and the guest's eth0", got)
		}
	})

	t.Run("GuestData", func(t *testing.T) {
		var info api.GuestAgentInfo
		if err := json.Unmarshal(v.mustCall(t, http.MethodGet, "guestosinfo"), &info); err != nil {
			t.Fatal(err)
		}
		if info.OS.KernelRelease == "" || info.GuestAgentVersion == "" {
			t.Errorf("guestosinfo = %+v, want the kernel release and agent version", info)
		}
		var fs api.FileSystemList
		if err := json.Unmarshal(v.mustCall(t, http.MethodGet, "filesystemlist"), &fs); err != nil {
			t.Fatal(err)
		}
		var users api.UserList
		if err := json.Unmarshal(v.mustCall(t, http.MethodGet, "userlist"), &users); err != nil {
			t.Fatal(err)
		}
		t.Logf("guestosinfo %+v; filesystems %+v; users %+v", info.OS, fs.Items, users.Items)
		if !slices.ContainsFunc(fs.Items, func(f api.FileSystem) bool { return f.MountPoint == "/cidata" }) {
			t.Errorf("filesystemlist = %+v, want the cidata mount", fs.Items)
		}
		if code, _ := v.call(t, http.MethodGet, "nosuch"); code != http.StatusNotFound {
			t.Errorf("unknown subresource: %d, want 404", code)
		}
		missing := &vm{h: h, name: "missing"}
		if code, _ := missing.call(t, http.MethodPut, "pause"); code != http.StatusNotFound {
			t.Errorf("pause of an unknown VMI: %d, want 404", code)
		}
	})

	t.Run("PauseStopsGuestClock", func(t *testing.T) {
		up0 := v.uptimeViaAPI(t, c)
		start := time.Now()
		v.mustCall(t, http.MethodPut, "pause")
		took := testenv.Eventually(t, 5*time.Second, "Paused=True, Ready=False", func() bool {
			vmi := v.get()
			return conditionIs(vmi, v1.VirtualMachineInstancePaused, corev1.ConditionTrue) &&
				conditionIs(vmi, v1.VirtualMachineInstanceReady, corev1.ConditionFalse)
		})
		t.Logf("pause → Paused=True in the API after %v", took.Round(time.Millisecond))
		if took > 2*time.Second {
			t.Errorf("Paused=True took %v, want ≤ 2s", took)
		}
		wantCond(t, v.get(), v1.VirtualMachineInstancePaused, corev1.ConditionTrue, v1.ReasonPausedByUser)
		time.Sleep(3 * time.Second) // the pause whose length the guest must not see
		v.mustCall(t, http.MethodPut, "unpause")
		paused := time.Since(start)
		testenv.Eventually(t, 5*time.Second, "Ready=True after unpause", func() bool {
			vmi := v.get()
			return conditionIs(vmi, v1.VirtualMachineInstanceReady, corev1.ConditionTrue) &&
				!conditionIs(vmi, v1.VirtualMachineInstancePaused, corev1.ConditionTrue)
		})
		up1 := v.uptimeViaAPI(t, c)
		wall := time.Since(start).Seconds()
		gap := wall - (up1 - up0)
		t.Logf("paused %.2fs: wall %.2fs, guest uptime advanced %.2fs (gap %.2fs)", paused.Seconds(), wall, up1-up0, gap)
		if gap < paused.Seconds()-1 {
			t.Errorf("guest clock gap %.2fs, want ≥ pause length − 1s (%.2fs)", gap, paused.Seconds()-1)
		}
	})

	t.Run("PauseSurvivesAgentKill", func(t *testing.T) {
		v.mustCall(t, http.MethodPut, "pause")
		testenv.Eventually(t, 5*time.Second, "Paused=True", func() bool {
			return conditionIs(v.get(), v1.VirtualMachineInstancePaused, corev1.ConditionTrue)
		})
		// Agent gone: resume QEMU behind its back (QMP takes one client,
		// free now). The restarted agent must re-apply the user's pause.
		h.killAgent()
		resumeBehindAgent(t, v)
		off := h.agentLogSize()
		h.startAgent(t)
		testenv.Eventually(t, 20*time.Second, "re-applied pause", func() bool {
			return len(h.agentLogLines(off, "re-applied pause")) > 0
		})
		var st struct{ Status string }
		testenv.Eventually(t, 10*time.Second, "node API back", func() bool {
			res, err := c.QMP(context.Background(), ref, api.Command{Execute: "query-status"})
			return err == nil && json.Unmarshal(res, &st) == nil
		})
		if st.Status != "paused" {
			t.Errorf("QEMU status %q after the agent restart, want paused", st.Status)
		}
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			vmi := v.get()
			if !conditionIs(vmi, v1.VirtualMachineInstancePaused, corev1.ConditionTrue) || conditionIs(vmi, v1.VirtualMachineInstanceReady, corev1.ConditionTrue) {
				t.Fatalf("VMI conditions after restart: %+v, want Paused=True, Ready=False", vmi.Status.Conditions)
			}
			time.Sleep(100 * time.Millisecond)
		}
		start := time.Now()
		if err := c.Unpause(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 5*time.Second, "Ready=True", func() bool {
			return conditionIs(v.get(), v1.VirtualMachineInstanceReady, corev1.ConditionTrue)
		})
		t.Logf("unpause after restart → Ready=True in %v", time.Since(start).Round(time.Millisecond))
		tl, err := c.Timeline(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(tl, func(e store.Event) bool { return e.Reason == "PauseReapplied" }) {
			t.Errorf("timeline %+v lacks PauseReapplied", tl)
		}
	})

	t.Run("StartPausedAndConsole", func(t *testing.T) {
		sp.waitPhase(t, v1.Running, 60*time.Second)
		testenv.Eventually(t, 5*time.Second, "Paused=True on the startPaused VMI", func() bool {
			return conditionIs(sp.get(), v1.VirtualMachineInstancePaused, corev1.ConditionTrue)
		})
		ws := sp.stream(t, "console")
		sp.mustCall(t, http.MethodPut, "unpause")
		out := readUntil(t, ws, "NODEVIRT-GUEST-READY", 90*time.Second)
		t.Logf("console after unpause: %d bytes up to the ready marker", len(out))
		if err := ws.WriteMessage(websocket.BinaryMessage, []byte("nodevirt-echo-1\r")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, ws, "nodevirt-echo-1", 20*time.Second)

		// A second session replaces the first.
		ws2 := sp.stream(t, "console")
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				if websocket.IsUnexpectedCloseError(err, websocket.CloseNormalClosure) && !strings.Contains(err.Error(), "replaced") {
					t.Logf("first session ended: %v", err)
				}
				break
			}
		}
		if err := ws2.WriteMessage(websocket.BinaryMessage, []byte("nodevirt-echo-2\r")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, ws2, "nodevirt-echo-2", 20*time.Second)
	})

	t.Run("VNC", func(t *testing.T) {
		ws := v.stream(t, "vnc")
		if got := readUntil(t, ws, "RFB 003.008\n", 20*time.Second); !strings.HasPrefix(got, "RFB 003.008\n") {
			t.Errorf("VNC greeting %q", got)
		}
		// Complete the version handshake: the server offers security types.
		if err := ws.WriteMessage(websocket.BinaryMessage, []byte("RFB 003.008\n")); err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := ws.ReadMessage()
		if err != nil || len(b) < 2 || b[0] == 0 {
			t.Errorf("security types: %v %v", b, err)
		}
	})

	t.Run("MutualTLS", func(t *testing.T) {
		path := v.vmiPath("guestosinfo")
		roots := certrotation.StaticRoots{P: h.ca.Pool()}
		good := api.ClientTLS(certrotationtest.Static{Cert: h.ca.APIClient(t)}, roots, testNode)
		// 409 means the handshake passed but the guest agent is not
		// (re)connected yet on a loaded machine; wait for it.
		code, err := h.tlsGet(good, path)
		for deadline := time.Now().Add(60 * time.Second); err == nil && code == http.StatusConflict && time.Now().Before(deadline); {
			time.Sleep(250 * time.Millisecond)
			code, err = h.tlsGet(good, path)
		}
		if err != nil || code != http.StatusOK {
			t.Errorf("nodevirt-api's certificate: %d, %v", code, err)
		}
		noCert := &tls.Config{RootCAs: h.ca.Pool(), ServerName: testNode, MinVersion: tls.VersionTLS13}
		if code, err := h.tlsGet(noCert, path); err == nil {
			t.Errorf("client without a certificate got %d, want the handshake refused", code)
		}
		proxy := api.ClientTLS(certrotationtest.Static{Cert: h.ca.Issue(t, "proxy", nil, x509.ExtKeyUsageClientAuth, time.Hour)}, roots, testNode)
		if code, err := h.tlsGet(proxy, path); err == nil {
			t.Errorf("client certificate of the CA with CN proxy got %d, want the handshake refused", code)
		}
		other := certrotationtest.NewCA(t, "other")
		foreign := api.ClientTLS(certrotationtest.Static{Cert: other.APIClient(t)}, roots, testNode)
		if code, err := h.tlsGet(foreign, path); err == nil {
			t.Errorf("client with a foreign certificate got %d, want the handshake refused", code)
		}
		if code, err := h.tlsGet(good, "/nodectl/v1/domains"); err != nil || code != http.StatusNotFound {
			t.Errorf("debug route over TLS: %d, %v; want 404", code, err)
		}
	})

	t.Run("PauseLatency", func(t *testing.T) {
		const n = 200
		var pause, unpause []time.Duration
		for range n {
			start := time.Now()
			v.mustCall(t, http.MethodPut, "pause")
			pause = append(pause, time.Since(start))
			start = time.Now()
			v.mustCall(t, http.MethodPut, "unpause")
			unpause = append(unpause, time.Since(start))
		}
		t.Logf("node API pause over %d calls: p50 %v, p99 %v", n, pct(pause, 50), pct(pause, 99))
		t.Logf("node API unpause over %d calls: p50 %v, p99 %v", n, pct(unpause, 50), pct(unpause, 99))
		testenv.Eventually(t, 5*time.Second, "Ready=True after the benchmark", func() bool {
			return conditionIs(v.get(), v1.VirtualMachineInstanceReady, corev1.ConditionTrue)
		})
	})

	t.Run("Nodectl", func(t *testing.T) {
		bin := filepath.Join(h.bin, "nodectl")
		build := exec.Command("go", "build", "-o", bin, "github.com/nodevirt/nodevirt/cmd/nodectl")
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build nodectl: %v\n%s", err, b)
		}
		nodectl := func(args ...string) (string, string) {
			t.Helper()
			cmd := exec.Command(bin, append([]string{"--socket", h.apiSocket, "--db", h.db}, args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("nodectl %v: %v\n%s", args, err, stderr.String())
			}
			return string(out), stderr.String()
		}
		if out, _ := nodectl("list"); !strings.Contains(out, v.name) || !strings.Contains(out, sp.name) {
			t.Errorf("nodectl list:\n%s", out)
		}
		if out, _ := nodectl("qmp", ref, `{"execute":"query-status"}`); !strings.Contains(out, `"status": "running"`) {
			t.Errorf("nodectl qmp query-status:\n%s", out)
		}
		if out, _ := nodectl("agent", ref, "guest-ping"); strings.TrimSpace(out) != "{}" {
			t.Errorf("nodectl agent guest-ping: %q", out)
		}
		nodectl("pause", ref)
		if out, _ := nodectl("show", ref); !strings.Contains(out, `"paused": true`) {
			t.Errorf("nodectl show after pause:\n%s", out)
		}
		nodectl("unpause", ref)
		online, _ := nodectl("timeline", ref)
		for _, want := range []string{"PauseRequested", "UnpauseRequested"} {
			if !strings.Contains(online, want) {
				t.Errorf("nodectl timeline lacks %s:\n%s", want, online)
			}
		}
		h.stopAgent()
		out, stderr := nodectl("list")
		if !strings.Contains(stderr, "read-only") || !strings.Contains(out, v.name) {
			t.Errorf("nodectl list with the agent down: stdout\n%s\nstderr\n%s", out, stderr)
		}
		uid := string(v.get().UID)
		if out, _ := nodectl("show", uid); !strings.Contains(out, `"name": "surf"`) {
			t.Errorf("nodectl show by UID with the agent down:\n%s", out)
		}
		if out, _ := nodectl("timeline", ref); !strings.Contains(out, "UnpauseRequested") {
			t.Errorf("nodectl timeline with the agent down:\n%s", out)
		}
		cmd := exec.Command(bin, "--socket", h.apiSocket, "--db", h.db, "pause", ref)
		if err := cmd.Run(); err == nil {
			t.Errorf("nodectl pause with the agent down succeeded")
		}
	})
}

// resumeBehindAgent sends QMP cont straight to QEMU (the agent is down).
func resumeBehindAgent(t *testing.T, v *vm) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var conn *qmp.Conn
	testenv.Eventually(t, 5*time.Second, "QMP socket free", func() bool {
		nc, err := dial(ctx, v.pod.Socket(podfs.QMPSocket))
		if err != nil {
			return false
		}
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		defer qcancel()
		conn, err = qmp.NewConn(qctx, nc, "test")
		return err == nil
	})
	defer conn.Close()
	if err := conn.Cont(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := conn.QueryStatus(ctx); err != nil || st.Status != "running" {
		t.Fatalf("QEMU after cont: %+v, %v", st, err)
	}
}

// pct is the p-th percentile of d.
func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Microsecond)
}
