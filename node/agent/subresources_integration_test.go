package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// softRebootTimeout is the agent's --soft-reboot-timeout in this test.
const softRebootTimeout = 15 * time.Second

// TestSubresources_Integration exercises the node API's VNC screenshot,
// port-forward and soft reboot without a guest agent on real QEMUs: a
// masquerade guest with VGA + VNC (screenshot, port-forward to its HTTP
// server, ACPI soft reboot), a guest whose agent is SIGKILLed in the middle
// of a soft reboot, and a guest that ignores the power button.
func TestSubresources_Integration(t *testing.T) {
	h := newHarness(t)
	h.agentArgs = []string{"--soft-reboot-timeout=" + softRebootTimeout.String()}
	h.startAgent(t)
	v := h.createVM(t, "sub", vmOpts{graphics: true, binding: "masquerade"})
	k := h.createVM(t, "crash", vmOpts{})
	w := h.createVM(t, "deaf", vmOpts{ignoreACPI: true})
	c := api.NewClient(h.apiSocket)

	for _, m := range []*vm{v, k, w} {
		m.waitPhase(t, v1.Running, 90*time.Second)
		m.waitSerial(t, "NODEVIRT-GUEST-READY", 90*time.Second)
	}
	v.waitSerial(t, "NODEVIRT-GUEST-DHCP ip=", 60*time.Second)
	// Without a guest agent from here on (the reboots bring it back; the
	// deaf guest gets it back after a while, to power itself off).
	for _, m := range []*vm{v, k, w} {
		testenv.Eventually(t, 60*time.Second, "guest agent of "+m.name, func() bool {
			return conditionIs(m.get(), v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue)
		})
	}
	disabled := time.Now()
	const deafAgentBack = 75 * time.Second
	disableGuestAgent(t, c, v, 0)
	disableGuestAgent(t, c, k, 0)
	disableGuestAgent(t, c, w, deafAgentBack)

	t.Run("Screenshot", func(t *testing.T) {
		resp := v.get2(t, "vnc/screenshot?moveCursor=true")
		if resp.code != http.StatusOK || resp.contentType != "image/png" {
			t.Fatalf("screenshot: %d %s %.200q", resp.code, resp.contentType, resp.body)
		}
		img, err := png.Decode(bytes.NewReader(resp.body))
		if err != nil {
			t.Fatalf("screenshot is not a PNG: %v", err)
		}
		b := img.Bounds()
		t.Logf("screenshot: %dx%d, %d bytes", b.Dx(), b.Dy(), len(resp.body))
		if b.Dx() < 320 || b.Dy() < 200 {
			t.Errorf("screenshot %dx%d, want at least 320x200", b.Dx(), b.Dy())
		}
		if again := v.get2(t, "vnc/screenshot"); again.code != http.StatusOK {
			t.Errorf("screenshot without moveCursor: %d %s", again.code, again.body)
		}
		left, _ := filepath.Glob(filepath.Join(v.pod.SocketsDir(), "screenshot-*"))
		if len(left) > 0 {
			t.Errorf("screendump files left behind: %v", left)
		}
		if r := w.get2(t, "vnc/screenshot"); r.code != http.StatusBadRequest || !strings.Contains(string(r.body), "no graphics devices") {
			t.Errorf("screenshot without a graphics device: %d %s, want 400", r.code, r.body)
		}
		if code, body := w.call(t, http.MethodGet, "vnc"); code != http.StatusBadRequest {
			t.Errorf("vnc without a graphics device: %d %s, want 400", code, body)
		}
	})

	t.Run("PortForward", func(t *testing.T) {
		// Two forwards at once, to both of the guest's HTTP ports.
		ws80 := v.stream(t, "portforward/80")
		ws8080 := v.stream(t, "portforward/8080/tcp")
		for _, ws := range []*websocket.Conn{ws80, ws8080} {
			if err := ws.WriteMessage(websocket.BinaryMessage, []byte("GET / HTTP/1.0\r\nHost: guest\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
		}
		for _, ws := range []*websocket.Conn{ws80, ws8080} {
			got := readUntil(t, ws, "nodevirt-guest", 20*time.Second)
			if !strings.HasPrefix(got, "HTTP/1.") {
				t.Errorf("answer through the port-forward: %.200q, want an HTTP response", got)
			}
		}
		t.Logf("HTTP through port-forward: ok")
		for sub, want := range map[string]int{
			"portforward/0":        http.StatusBadRequest,
			"portforward/70000":    http.StatusBadRequest,
			"portforward/80/sctp":  http.StatusBadRequest,
			"portforward/notaport": http.StatusBadRequest,
		} {
			if code, body := v.call(t, http.MethodGet, sub); code != want {
				t.Errorf("GET %s: %d %s, want %d", sub, code, body, want)
			}
		}
		if code, body := w.call(t, http.MethodGet, "portforward/80"); code != http.StatusBadRequest {
			t.Errorf("port-forward to a VMI without a pod network: %d %s, want 400", code, body)
		}
		// Nothing listens on 81: the guest refuses, the API says so.
		if code, body := v.call(t, http.MethodGet, "portforward/81"); code != http.StatusBadGateway {
			t.Errorf("port-forward to a closed port: %d %s, want 502", code, body)
		}
	})

	for _, m := range []*vm{v, k, w} {
		testenv.Eventually(t, 60*time.Second, "guest agent of "+m.name+" disconnected", func() bool {
			return conditionIs(m.get(), v1.VirtualMachineInstanceAgentConnected, corev1.ConditionFalse) ||
				!hasCondition(m.get(), v1.VirtualMachineInstanceAgentConnected)
		})
	}
	t.Logf("guest agents reported disconnected %v after they were stopped", time.Since(disabled).Round(time.Second))

	t.Run("SoftRebootWithoutGuestAgent", func(t *testing.T) {
		pid := v.qemuPID(t)
		boots := v.serial.count("NODEVIRT-GUEST-READY")
		start := time.Now()
		v.mustCall(t, http.MethodPut, "softreboot")
		t.Logf("softreboot answered after %v", time.Since(start).Round(time.Millisecond))
		testenv.Eventually(t, 90*time.Second, "the guest booting again", func() bool {
			return v.serial.count("NODEVIRT-GUEST-READY") > boots
		})
		t.Logf("softreboot → ready marker again after %v", time.Since(start).Round(time.Millisecond))
		if v.serial.count("NODEVIRT-GUEST-POWERDOWN") == 0 {
			t.Errorf("the guest never saw the power button; console:\n%s", v.serial)
		}
		if got := v.qemuPID(t); got != pid {
			t.Errorf("QEMU pid %d after the soft reboot, want the same process %d", got, pid)
		}
		if vmi := v.get(); vmi.Status.Phase != v1.Running {
			t.Errorf("VMI phase %s after the soft reboot, want Running", vmi.Status.Phase)
		}
		wantTimeline(t, c, v, "SoftRebootRequested", "SoftRebooted")
		if rec, err := c.Domain(context.Background(), v.ref()); err != nil || rec.Intent.Reboot != nil {
			t.Errorf("record after the reboot: intent %+v, %v; want no reboot intent", rec.Intent, err)
		}
		// The shutdown action is restored: the guest's own power-off
		// ends the VM (its agent is back after the reboot).
		testenv.Eventually(t, 60*time.Second, "guest agent back after the reboot", func() bool {
			return conditionIs(v.get(), v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue)
		})
		powerOffViaAgent(t, c, v)
		v.waitPhase(t, v1.Succeeded, 60*time.Second)
		st, err := v.launcherStatus()
		if err == nil && st.Exit != nil && !st.Exit.GuestShutdown {
			t.Errorf("launcher exit %+v, want a guest shutdown", st.Exit)
		}
	})

	t.Run("SoftRebootSurvivesAgentKill", func(t *testing.T) {
		pid := k.qemuPID(t)
		boots := k.serial.count("NODEVIRT-GUEST-READY")
		off := h.agentLogSize()
		go func() {
			// Fails when the agent dies under it.
			req, _ := http.NewRequest(http.MethodPut, "http://agent"+k.vmiPath("softreboot"), nil)
			if resp, err := h.apiHTTP().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		testenv.Eventually(t, 20*time.Second, "power button pressed", func() bool {
			return len(h.agentLogLines(off, "soft reboot: ACPI power button pressed")) > 0
		})
		h.killAgent()
		// The guest powers off; QEMU holds it (shutdown action pause).
		testenv.Eventually(t, 30*time.Second, "QEMU holding the powered-off guest", func() bool {
			return qmpStatusBehindAgent(t, k) == qmp.RunStateShutdown
		})
		rec, err := store.Open(h.db, store.Options{ReadOnly: true})
		if err == nil {
			r, gerr := rec.Get(context.Background(), string(k.get().UID))
			rec.Close()
			if gerr != nil || r.Intent.Reboot == nil {
				t.Errorf("record with the agent down: intent %+v, %v; want the reboot intent", r.Intent, gerr)
			}
		}
		h.startAgent(t)
		testenv.Eventually(t, 90*time.Second, "the guest booting again after the agent restart", func() bool {
			return k.serial.count("NODEVIRT-GUEST-READY") > boots
		})
		if got := k.qemuPID(t); got != pid {
			t.Errorf("QEMU pid %d after the soft reboot, want %d", got, pid)
		}
		if vmi := k.get(); vmi.Status.Phase != v1.Running {
			t.Errorf("VMI phase %s, want Running", vmi.Status.Phase)
		}
		testenv.Eventually(t, 10*time.Second, "node API back", func() bool {
			_, err := c.Domain(context.Background(), k.ref())
			return err == nil
		})
		wantTimeline(t, c, k, "SoftRebootRequested", "SoftRebooted")
	})

	t.Run("SoftRebootIgnoredByGuest", func(t *testing.T) {
		pid := w.qemuPID(t)
		start := time.Now()
		code, body := w.call(t, http.MethodPut, "softreboot")
		took := time.Since(start)
		t.Logf("softreboot of a guest ignoring ACPI: %d %s after %v", code, body, took.Round(time.Millisecond))
		if code != http.StatusGatewayTimeout || !strings.Contains(string(body), "did not shut down") {
			t.Errorf("softreboot: %d %s, want 504 saying the guest did not shut down", code, body)
		}
		if took < softRebootTimeout-time.Second || took > softRebootTimeout+10*time.Second {
			t.Errorf("softreboot took %v, want about %v", took, softRebootTimeout)
		}
		w.waitSerial(t, "NODEVIRT-GUEST-POWERDOWN-IGNORED", 5*time.Second)
		wantTimeline(t, c, w, "SoftRebootRequested", "SoftRebootTimedOut")
		if rec, err := c.Domain(context.Background(), w.ref()); err != nil || rec.Intent.Reboot != nil {
			t.Errorf("record: intent %+v, %v; want no reboot intent", rec.Intent, err)
		}
		if vmi := w.get(); vmi.Status.Phase != v1.Running || w.qemuPID(t) != pid {
			t.Errorf("VMI phase %s, want Running with the same QEMU", vmi.Status.Phase)
		}
		// The shutdown action is restored: once its agent is back the
		// guest powers itself off and QEMU ends.
		time.Sleep(time.Until(disabled.Add(deafAgentBack)))
		testenv.Eventually(t, 60*time.Second, "guest agent of the deaf guest back", func() bool {
			return conditionIs(w.get(), v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue)
		})
		powerOffViaAgent(t, c, w)
		w.waitPhase(t, v1.Succeeded, 60*time.Second)
		st, err := w.launcherStatus()
		if err == nil && (st.State != launcher.StateExited || st.Exit == nil || !st.Exit.GuestShutdown) {
			t.Errorf("launcher status %+v, want exited on a guest shutdown", st)
		}
	})
}

func (v *vm) ref() string { return v.h.ns + "/" + v.name }

// disableGuestAgent stops the guest's qemu-ga through itself: the binary is
// replaced by a script that sleeps for back (forever when 0) before it
// runs the real one, and the running qemu-ga is killed after it answered
// (init respawns the script). A reboot restores the RAM root file system.
func disableGuestAgent(t *testing.T, c *api.Client, v *vm, back time.Duration) {
	t.Helper()
	sleep := "2147483647"
	if back > 0 {
		sleep = fmt.Sprint(int(back.Seconds()))
	}
	script := fmt.Sprintf(`set -e
p=$(pidof qemu-ga)
mv /usr/sbin/qemu-ga /usr/sbin/qemu-ga.real
printf '#!/bin/sh\nsleep %s\nexec /usr/sbin/qemu-ga.real "$@"\n' > /usr/sbin/qemu-ga
chmod +x /usr/sbin/qemu-ga
(sleep 1; kill $p) >/dev/null 2>&1 </dev/null &
`, sleep)
	req, _ := json.Marshal(map[string]any{"path": "/bin/sh", "arg": []string{"-c", script}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Agent(ctx, v.ref(), api.Command{Execute: "guest-exec", Arguments: req}); err != nil {
		t.Fatalf("VM %s: disable the guest agent: %v", v.name, err)
	}
}

// powerOffViaAgent asks the guest agent to power the guest off.
func powerOffViaAgent(t *testing.T, c *api.Client, v *vm) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := json.Marshal(map[string]string{"mode": "powerdown"})
	// guest-shutdown has no answer on success; the connection may end.
	_, _ = c.Agent(ctx, v.ref(), api.Command{Execute: "guest-shutdown", Arguments: req})
}

// wantTimeline checks that the VM's timeline has the reasons, in order.
func wantTimeline(t *testing.T, c *api.Client, v *vm, reasons ...string) {
	t.Helper()
	tl, err := c.Timeline(context.Background(), v.ref())
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, e := range tl {
		if i < len(reasons) && e.Reason == reasons[i] {
			i++
		}
	}
	if i < len(reasons) {
		var got []string
		for _, e := range tl {
			got = append(got, e.Reason+": "+e.Message)
		}
		t.Errorf("VM %s timeline lacks %v in order:\n%s", v.name, reasons[i:], strings.Join(got, "\n"))
	}
}

// qmpStatusBehindAgent asks QEMU for its run state on the QMP socket (free
// while the agent is down); "" if it cannot.
func qmpStatusBehindAgent(t *testing.T, v *vm) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	nc, err := dial(ctx, v.pod.Socket(podfs.QMPSocket))
	if err != nil {
		return ""
	}
	conn, err := qmp.NewConn(ctx, nc, "test")
	if err != nil {
		return ""
	}
	defer conn.Close()
	st, err := conn.QueryStatus(ctx)
	if err != nil {
		return ""
	}
	return st.Status
}

func hasCondition(vmi *v1.VirtualMachineInstance, typ v1.VirtualMachineInstanceConditionType) bool {
	return vmi != nil && slices.ContainsFunc(vmi.Status.Conditions, func(c v1.VirtualMachineInstanceCondition) bool {
		return c.Type == typ
	})
}

// response is a GET's status, content type and body.
type response struct {
	code        int
	contentType string
	body        []byte
}

// get2 GETs the VM's public route sub on the unix socket.
func (v *vm) get2(t *testing.T, sub string) response {
	t.Helper()
	resp, err := v.h.apiHTTP().Get("http://agent" + v.vmiPath(sub))
	if err != nil {
		t.Fatalf("GET %s: %v", sub, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: b}
}
