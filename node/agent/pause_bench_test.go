package agent_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/hack/testenv/bareqemu"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// TestPause_Latency measures pause and unpause at the node API (the
// agent's unix socket, real agent process, bbolt file and QEMU under TCG)
// on one running VM, first with its record alone in the store, then with
// 100 and 1000 more records (tombstones cloned from it, with full
// timelines), as a node holds after VMs come and go. In the same run it
// measures the floors a pause cannot go under: QMP stop and cont on a bare
// QEMU (same binary, TCG, no agent) and one durable store write of the
// VM's record in a fresh store file on the same filesystem. It reports; it
// does not assert timings. It runs only with NODEVIRT_BENCH=1 (make
// bench-pause). With NODEVIRT_BENCH_TRACE=<file> it also writes the
// agent's execution trace of the first measurement there (go tool trace).
func TestPause_Latency(t *testing.T) {
	if os.Getenv("NODEVIRT_BENCH") != "1" {
		t.Skip("a measurement: set NODEVIRT_BENCH=1 (make bench-pause)")
	}
	h := newHarness(t)
	traceFile := os.Getenv("NODEVIRT_BENCH_TRACE")
	if traceFile != "" {
		h.agentArgs = append(h.agentArgs, "--profiling=true")
	}
	h.startAgent(t)
	v := h.createVM(t, "pause", vmOpts{})
	v.waitPhase(t, v1.Running, 90*time.Second)
	v.waitSerial(t, "NODEVIRT-GUEST-READY", 90*time.Second)
	c := h.apiHTTP()

	// The bare QEMUs of the floor stop when its subtest ends: left
	// running, their TCG threads would compete with the agent for the
	// machine's cores for the rest of the measurement.
	t.Run("QMPFloor", func(t *testing.T) { measureQMPFloor(t, h.guest) })
	if traceFile != "" {
		done := traceAgent(t, h.metricsAddr, traceFile, 2*time.Second)
		measurePause(t, v, c, "1 record (traced)", nil)
		<-done
	}
	measurePassthrough(t, v, c)
	measurePause(t, v, c, "1 record", nil)
	measurePause(t, v, c, "1 record, settled", watchPaused(t, v))
	seeded := 0
	for _, n := range []int{100, 1000} {
		h.stopAgent()
		if seeded == 0 {
			measureStoreFloor(t, h.db, string(v.vmi.UID))
		}
		seedTombstones(t, h.db, string(v.vmi.UID), seeded, n)
		seeded = n
		h.startAgent(t)
		testenv.Eventually(t, 30*time.Second, "the restarted agent serves pause", func() bool {
			code, _ := v.callWith(c, http.MethodPut, "unpause")
			return code == http.StatusOK
		})
		measurePause(t, v, c, fmt.Sprintf("%d records", n+1), nil)
		measurePause(t, v, c, fmt.Sprintf("%d records, settled", n+1), watchPaused(t, v))
	}
	testenv.Eventually(t, 10*time.Second, "Ready=True after the benchmark", func() bool {
		return conditionIs(v.get(), v1.VirtualMachineInstanceReady, corev1.ConditionTrue)
	})
}

// traceAgent starts fetching the agent's execution trace of the next d
// into file; the channel closes when it is written.
func traceAgent(t *testing.T, addr, file string, d time.Duration) <-chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/trace?seconds=%d", addr, int(d.Seconds())))
		if err != nil {
			t.Errorf("trace: %v", err)
			return
		}
		defer resp.Body.Close()
		out, err := os.Create(file)
		if err != nil {
			t.Errorf("trace: %v", err)
			return
		}
		defer out.Close()
		if _, err := io.Copy(out, resp.Body); err != nil {
			t.Errorf("trace: %v", err)
		}
	}()
	time.Sleep(100 * time.Millisecond) // the trace has started
	return done
}

// measurePause runs 200 pause/unpause cycles and logs p50 and p99 of
// each. Back to back when paused is nil; else settled, as e2e/bench does:
// each call waits until paused says the VMI's Paused condition followed.
func measurePause(t *testing.T, v *vm, c *http.Client, what string, paused <-chan bool) {
	t.Helper()
	const n = 200
	var pause, unpause []time.Duration
	for range n {
		for _, step := range []struct {
			action string
			on     bool
			d      *[]time.Duration
		}{{"pause", true, &pause}, {"unpause", false, &unpause}} {
			start := time.Now()
			if code, body := v.callWith(c, http.MethodPut, step.action); code != http.StatusOK {
				t.Fatalf("%s: %d %s", step.action, code, body)
			}
			*step.d = append(*step.d, time.Since(start))
			if paused != nil {
				waitPaused(t, paused, step.on)
			}
		}
	}
	t.Logf("%s: pause p50 %v p99 %v; unpause p50 %v p99 %v (%d cycles)", what,
		pct(pause, 50), pct(pause, 99), pct(unpause, 50), pct(unpause, 99), n)
}

// measurePassthrough logs p50 and p99 of QMP commands sent through the
// node API's debug passthrough on the same socket and VM: 200 query-status
// calls (the request path of a pause: HTTP, resolving the VMI, the
// domain's QMP connection) and 200 stop/cont cycles (that path plus what
// stopping this VM's QEMU costs: a pause without its store write and
// without the reconcile it sets off).
func measurePassthrough(t *testing.T, v *vm, c *http.Client) {
	t.Helper()
	call := func(command string) time.Duration {
		start := time.Now()
		resp, err := c.Post("http://agent"+api.DebugPrefix+api.RouteQMP+"?vmi="+url.QueryEscape(string(v.vmi.UID)),
			"application/json", strings.NewReader(`{"execute":"`+command+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", command, resp.StatusCode)
		}
		return time.Since(start)
	}
	var query, stop, cont []time.Duration
	for range 200 {
		query = append(query, call("query-status"))
	}
	for range 200 {
		stop = append(stop, call("stop"))
		cont = append(cont, call("cont"))
	}
	t.Logf("node API path without the store (QMP passthrough, this VM): query-status p50 %v p99 %v; stop p50 %v p99 %v; cont p50 %v p99 %v (200 each)",
		pct(query, 50), pct(query, 99), pct(stop, 50), pct(stop, 99), pct(cont, 50), pct(cont, 99))
}

// measureQMPFloor logs p50 and p99 of 200 QMP stop and cont round trips
// on bare QEMUs under TCG (no agent, no HTTP, no store): one idle in its
// firmware, and one running the test guest the measured VM runs (same
// kernel, initrd and arguments, booted to its ready line), whose vCPU
// the stop must kick out of TCG: the floor of a pause at the node API.
func measureQMPFloor(t *testing.T, guest string) {
	t.Helper()
	_, idle := bareqemu.Start(t, "-accel", "tcg", "-machine", "q35", "-m", "128", "-nodefaults")
	qmpRoundTrips(t, idle, "idle firmware")
	serial := filepath.Join(t.TempDir(), "serial.log")
	_, booted := bareqemu.Start(t, "-accel", "tcg", "-machine", "q35", "-m", "128", "-nodefaults",
		"-kernel", filepath.Join(guest, "vmlinux"), "-initrd", filepath.Join(guest, "initrd.img"),
		"-append", "console=ttyS0 quiet panic=-1", "-serial", "file:"+serial)
	testenv.Eventually(t, 90*time.Second, "the bare guest is ready", func() bool {
		b, _ := os.ReadFile(serial)
		return strings.Contains(string(b), "NODEVIRT-GUEST-READY")
	})
	qmpRoundTrips(t, booted, "running the test guest")
}

// qmpRoundTrips logs p50 and p99 of 200 stop and cont round trips on conn.
func qmpRoundTrips(t *testing.T, conn *qmp.Conn, what string) {
	t.Helper()
	ctx := t.Context()
	var stop, cont []time.Duration
	for range 200 {
		start := time.Now()
		if err := conn.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		stop = append(stop, time.Since(start))
		start = time.Now()
		if err := conn.Cont(ctx); err != nil {
			t.Fatal(err)
		}
		cont = append(cont, time.Since(start))
	}
	t.Logf("floor, raw QMP on a bare QEMU (%s): stop p50 %v p99 %v; cont p50 %v p99 %v (200 cycles)",
		what, pct(stop, 50), pct(stop, 99), pct(cont, 50), pct(cont, 99))
}

// measureStoreFloor logs p50 and p99 of 200 durable pause intents of the
// record uid (read from the agent's store at path, the agent stopped) in a
// fresh store file beside it, made as a pause makes them (SetPaused: the
// store's part of the floor) and, for comparison, as a bbolt update of the
// record with its event.
func measureStoreFloor(t *testing.T, path, uid string) {
	t.Helper()
	ctx := t.Context()
	src, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := src.Get(ctx, uid)
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	floorPath := filepath.Join(filepath.Dir(path), "floor.db")
	db, err := store.Open(floorPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close(); os.Remove(floorPath) }()
	if err := db.Put(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var updates, intents []time.Duration
	for i := range 200 {
		start := time.Now()
		_, err := db.Update(ctx, uid, func(r *store.Record) error {
			r.Intent.Paused = i%2 == 0
			return nil
		}, store.Event{Time: time.Now(), Reason: "PauseRequested", Message: "floor"})
		if err != nil {
			t.Fatal(err)
		}
		updates = append(updates, time.Since(start))
	}
	for i := range 200 {
		start := time.Now()
		if err := db.SetPaused(ctx, uid, i%2 == 0, store.Event{Time: time.Now(), Reason: "PauseRequested", Message: "floor"}); err != nil {
			t.Fatal(err)
		}
		intents = append(intents, time.Since(start))
	}
	t.Logf("floor, the store write a pause makes (intent and an event): through the intent log p50 %v p99 %v; "+
		"as a bbolt update of the record (%d bytes of launch spec) p50 %v p99 %v (200 each)",
		pct(intents, 50), pct(intents, 99), len(rec.Spec), pct(updates, 50), pct(updates, 99))
}

// callWith sends method to the VM's public route sub with c.
func (v *vm) callWith(c *http.Client, method, sub string) (int, string) {
	req, err := http.NewRequest(method, "http://agent"+v.vmiPath(sub), nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b [512]byte
	k, _ := resp.Body.Read(b[:])
	return resp.StatusCode, string(b[:k])
}

// seedTombstones adds tombstones from..n-1 to the store file at path, each
// a copy of the record uid (same namespace, other names) with a full
// timeline.
func seedTombstones(t *testing.T, path, uid string, from, n int) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec, err := db.Get(ctx, uid)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < n; i++ {
		r := rec
		r.UID, r.Name, r.Gone = fmt.Sprintf("seed-%03d", i), fmt.Sprintf("gone-%03d", i), time.Now()
		evs := make([]store.Event, store.DefaultTimelineLimit)
		for j := range evs {
			evs[j] = store.Event{Time: time.Now(), Reason: "Seeded", Message: "a past VM's timeline"}
		}
		if err := db.Put(ctx, r, evs...); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seeded %d tombstones of %d bytes of launch spec each", n-from, len(rec.Spec))
}

// watchPaused watches the VMI of v until the test ends and sends whether
// its Paused condition is true on every change of the VMI.
func watchPaused(t *testing.T, v *vm) <-chan bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := v.h.virt.KubevirtV1().VirtualMachineInstances(v.h.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", v.name).String(),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ch := make(chan bool, 16)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if vmi, ok := ev.Object.(*v1.VirtualMachineInstance); ok {
				select {
				case ch <- conditionIs(vmi, v1.VirtualMachineInstancePaused, corev1.ConditionTrue):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch
}

// waitPaused waits until paused reports on.
func waitPaused(t *testing.T, paused <-chan bool, on bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case p := <-paused:
			if p == on {
				return
			}
		case <-timeout:
			t.Fatalf("Paused condition not %v after 10s", on)
		}
	}
}
