package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/store"
)

// thawSlack is how late after its deadline a thaw may be seen: the
// reconcile's requeue, the thaw, and this test's polling.
const thawSlack = 2 * time.Second

// TestFreeze_Integration freezes a real guest's filesystems through its
// qemu-ga and checks the agent thaws them by the unfreeze deadline,
// without an unfreeze: on its own, after a renewal, and after the agent
// was SIGKILLed while the guest was frozen (deadline still ahead, and
// passed while the agent was down).
func TestFreeze_Integration(t *testing.T) {
	h := newHarness(t)
	h.startAgent(t)
	v := h.createVM(t, "frz", vmOpts{scratch: "16Mi"})
	c := api.NewClient(h.apiSocket)
	v.waitPhase(t, v1.Running, 90*time.Second)
	v.waitSerial(t, "NODEVIRT-GUEST-READY", 90*time.Second)
	testenv.Eventually(t, 60*time.Second, "guest agent of "+v.name, func() bool {
		return conditionIs(v.get(), v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue)
	})
	if st := v.fsFreezeStatus(t, c); st != "thawed" {
		t.Fatalf("fsfreeze status %q before any freeze, want thawed", st)
	}
	// Something to freeze: qemu-ga reports a guest with no freezable
	// file system (its root is the initramfs) as thawed right after a
	// freeze.
	if code, out := v.execViaAPI(t, c, 60*time.Second, "/bin/sh", "-c", mountScratch); code != 0 {
		t.Fatalf("mount an ext4 file system in the guest: exit %d: %s", code, out)
	}

	t.Run("DeadlineThaws", func(t *testing.T) {
		start := time.Now()
		v.freeze(t, `{"unfreezeTimeout":"2s"}`)
		t.Logf("freeze answered after %v", time.Since(start).Round(time.Millisecond))
		if st := v.fsFreezeStatus(t, c); st != "frozen" {
			t.Fatalf("fsfreeze status %q after freeze, want frozen", st)
		}
		deadline := v.freezeDeadline(t, c)
		if d := deadline.Sub(start); d < 2*time.Second || d > 3*time.Second {
			t.Errorf("recorded deadline %v after the request, want 2s", d)
		}
		thawed := v.waitThawed(t, c, deadline.Add(thawSlack))
		t.Logf("freeze 2s: thawed %v after the deadline (%v after the freeze request)",
			thawed.Sub(deadline).Round(time.Millisecond), thawed.Sub(start).Round(time.Millisecond))
		if thawed.Before(deadline) {
			t.Errorf("thawed %v before the deadline", deadline.Sub(thawed))
		}
		v.wantNoFreezeIntent(t, c)
		wantTimeline(t, c, v, "FreezeRequested", "Thawed")
	})

	t.Run("UnfreezeThawsAtOnce", func(t *testing.T) {
		v.freeze(t, "") // KubeVirt's default, 5 minutes
		if st := v.fsFreezeStatus(t, c); st != "frozen" {
			t.Fatalf("fsfreeze status %q after freeze, want frozen", st)
		}
		if d := time.Until(v.freezeDeadline(t, c)); d < 4*time.Minute || d > 5*time.Minute {
			t.Errorf("deadline %v ahead, want 5m", d)
		}
		start := time.Now()
		v.mustCall(t, http.MethodPut, "unfreeze")
		t.Logf("unfreeze answered after %v", time.Since(start).Round(time.Millisecond))
		if st := v.fsFreezeStatus(t, c); st != "thawed" {
			t.Errorf("fsfreeze status %q right after unfreeze, want thawed", st)
		}
		v.wantNoFreezeIntent(t, c)
		// Unfreezing a thawed guest is harmless.
		v.mustCall(t, http.MethodPut, "unfreeze")
	})

	t.Run("FreezeRenewsTheDeadline", func(t *testing.T) {
		v.freeze(t, `{"unfreezeTimeout":"2s"}`)
		first := v.freezeDeadline(t, c)
		time.Sleep(time.Second)
		v.freeze(t, `{"unfreezeTimeout":"4s"}`)
		renewed := v.freezeDeadline(t, c)
		if !renewed.After(first.Add(2 * time.Second)) {
			t.Fatalf("renewed deadline %v, want about 3s after the first %v", renewed, first)
		}
		time.Sleep(time.Until(first.Add(time.Second)))
		if st := v.fsFreezeStatus(t, c); st != "frozen" {
			t.Fatalf("fsfreeze status %q past the first deadline, want frozen until the renewed one", st)
		}
		thawed := v.waitThawed(t, c, renewed.Add(thawSlack))
		t.Logf("renewed freeze: thawed %v after the renewed deadline", thawed.Sub(renewed).Round(time.Millisecond))
		v.wantNoFreezeIntent(t, c)
	})

	t.Run("BadTimeoutRefused", func(t *testing.T) {
		for _, body := range []string{`{"unfreezeTimeout":"0s"}`, `{"unfreezeTimeout":"-1m"}`, `{"unfreezeTimeout":"2h"}`} {
			code, b := v.callBody(t, http.MethodPut, "freeze", body)
			if code != http.StatusBadRequest || !strings.Contains(string(b), "unfreezeTimeout") {
				t.Errorf("freeze %s: %d %s, want 400 naming unfreezeTimeout", body, code, b)
			}
		}
		if st := v.fsFreezeStatus(t, c); st != "thawed" {
			t.Errorf("fsfreeze status %q after refused freezes, want thawed", st)
		}
	})

	t.Run("ThawAfterAgentKillDeadlineAhead", func(t *testing.T) {
		v.freeze(t, `{"unfreezeTimeout":"6s"}`)
		deadline := v.freezeDeadline(t, c)
		if st := v.fsFreezeStatus(t, c); st != "frozen" {
			t.Fatalf("fsfreeze status %q after freeze, want frozen", st)
		}
		h.killAgent() // SIGKILL by pid
		wantFreezeIntentOnDisk(t, h, v)
		restart := h.startAgent(t)
		thawed := v.waitThawed(t, c, deadline.Add(thawSlack))
		t.Logf("SIGKILL + restart %v before the deadline: thawed %v after the deadline",
			deadline.Sub(restart).Round(time.Millisecond), thawed.Sub(deadline).Round(time.Millisecond))
		v.wantNoFreezeIntent(t, c)
	})

	t.Run("ThawAfterAgentKillDeadlinePassed", func(t *testing.T) {
		testenv.Eventually(t, 60*time.Second, "guest agent connected", func() bool {
			_, err := c.Agent(context.Background(), v.ref(), api.Command{Execute: "guest-ping"})
			return err == nil
		})
		v.freeze(t, `{"unfreezeTimeout":"2s"}`)
		deadline := v.freezeDeadline(t, c)
		h.killAgent()
		wantFreezeIntentOnDisk(t, h, v)
		time.Sleep(time.Until(deadline.Add(2 * time.Second)))
		restart := h.startAgent(t)
		thawed := v.waitThawed(t, c, restart.Add(10*time.Second))
		t.Logf("SIGKILL, deadline passed while down: thawed %v after the restart",
			thawed.Sub(restart).Round(time.Millisecond))
		v.wantNoFreezeIntent(t, c)
		wantTimeline(t, c, v, "FreezeRequested", "Thawed")
	})
}

// mountScratch formats the guest's scratch disk (its only virtio disk)
// and mounts it with the ext4 driver (loaded after the ready marker).
const mountScratch = `set -e
for _ in $(seq 1 100); do grep -q ext4 /proc/filesystems && break; sleep 0.1; done
grep -q ext4 /proc/filesystems || { echo "no ext4 in the guest kernel: rebuild the guest (make guest-images)"; exit 1; }
dev=$(ls /dev/vd* | head -n 1)
mke2fs -q "$dev"
mkdir -p /mnt/scratch
mount -t ext4 "$dev" /mnt/scratch
echo hello > /mnt/scratch/hello
`

// freeze PUTs freeze with body and fails the test unless it succeeded.
func (v *vm) freeze(t *testing.T, body string) {
	t.Helper()
	if code, b := v.callBody(t, http.MethodPut, "freeze", body); code != http.StatusOK {
		t.Fatalf("VM %s: freeze %s: %d %s", v.name, body, code, b)
	}
}

// callBody is call with a request body.
func (v *vm) callBody(t *testing.T, method, sub, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://agent"+v.vmiPath(sub), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := v.h.apiHTTP().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, sub, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// fsFreezeStatus asks the guest agent, through the node agent, whether the
// guest's filesystems are frozen; "" when it cannot.
func (v *vm) fsFreezeStatus(t *testing.T, c *api.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := c.Agent(ctx, v.ref(), api.Command{Execute: "guest-fsfreeze-status"})
	if err != nil {
		t.Logf("guest-fsfreeze-status: %v", err)
		return ""
	}
	var st string
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("guest-fsfreeze-status answered %s: %v", raw, err)
	}
	return st
}

// waitThawed polls the guest's freeze status until it is thawed and
// returns when it first was; it fails the test past by.
func (v *vm) waitThawed(t *testing.T, c *api.Client, by time.Time) time.Time {
	t.Helper()
	for {
		at := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		raw, err := c.Agent(ctx, v.ref(), api.Command{Execute: "guest-fsfreeze-status"})
		cancel()
		var st string
		if err == nil && json.Unmarshal(raw, &st) == nil && st == "thawed" {
			return at
		}
		if time.Now().After(by) {
			t.Fatalf("VM %s: still %q (%v) %v past the allowed time", v.name, st, err, time.Since(by).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freezeDeadline is the deadline in the VM's record.
func (v *vm) freezeDeadline(t *testing.T, c *api.Client) time.Time {
	t.Helper()
	rec, err := c.Domain(context.Background(), v.ref())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Intent.Freeze == nil {
		t.Fatalf("VM %s: no freeze intent in the record after freeze", v.name)
	}
	return rec.Intent.Freeze.Deadline
}

// wantNoFreezeIntent checks the record's freeze intent is cleared (soon:
// the thaw is seen before the record is written).
func (v *vm) wantNoFreezeIntent(t *testing.T, c *api.Client) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "freeze intent cleared", func() bool {
		rec, err := c.Domain(context.Background(), v.ref())
		return err == nil && rec.Intent.Freeze == nil
	})
}

// wantFreezeIntentOnDisk checks, with the agent down, that the store holds
// the freeze deadline.
func wantFreezeIntentOnDisk(t *testing.T, h *harness, v *vm) {
	t.Helper()
	db, err := store.Open(h.db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open the store with the agent down: %v", err)
	}
	defer db.Close()
	r, err := db.Get(context.Background(), string(v.get().UID))
	if err != nil || r.Intent.Freeze == nil {
		t.Fatalf("record with the agent down: intent %+v, %v; want the freeze deadline", r.Intent, err)
	}
}
