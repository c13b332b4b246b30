package agent_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// TestAgent_Integration runs the real agent against a real API server, with
// real launchers running QEMU (TCG) in pod-like directories and netns. The
// test plays the controller (Scheduled VMIs, Pod objects) and the kubelet
// (it starts the launchers).
func TestAgent_Integration(t *testing.T) {
	h := newHarness(t)
	h.startAgent(t)

	masq := h.createVM(t, "masq", vmOpts{binding: "masquerade", userData: "#!/bin/sh\necho hello-from-userdata\n"})
	bridge := h.createVM(t, "bridge", vmOpts{binding: "bridge"})
	plain := h.createVM(t, "plain", vmOpts{})
	vms := []*vm{masq, bridge, plain}

	t.Run("ScheduledBecomesRunning", func(t *testing.T) {
		for _, v := range vms {
			v.waitPhase(t, v1.Running, 60*time.Second)
			t.Logf("VM %s Running after %v", v.name, time.Since(v.created).Round(time.Millisecond))
		}
		for _, v := range vms {
			v.waitSerial(t, "NODEVIRT-GUEST-READY", 90*time.Second)
		}
		got := masq.waitPhase(t, v1.Running, time.Second)
		wantCond(t, got, v1.VirtualMachineInstanceReady, corev1.ConditionTrue, "")
		wantCond(t, got, v1.VirtualMachineInstanceIsMigratable, corev1.ConditionTrue, "")
		if len(got.Status.Interfaces) != 1 || got.Status.Interfaces[0].IPAddress != "10.244.0.5" || got.Status.Interfaces[0].MAC == "" {
			t.Errorf("masq status.interfaces = %+v, want one with the pod IP 10.244.0.5 and a MAC", got.Status.Interfaces)
		}
		wantCond(t, bridge.get(), v1.VirtualMachineInstanceIsMigratable, corev1.ConditionFalse, netsetup.ReasonInterfaceNotLiveMigratable)
		h.wantEvent(t, masq, corev1.EventTypeNormal, "Started")
		node, err := h.kube.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
		if err != nil || node.Labels[v1.SchedulableLabel] != "true" || node.Annotations[v1.HeartbeatAnnotation] == "" {
			t.Errorf("node heartbeat missing: %v, %v", node.GetLabels(), err)
		}
		// The node carries the agent's KVM verdict; a pod without a
		// devices.kubevirt.io/kvm request (the harness's) runs TCG.
		hostKVM := convert.DetectKVM(os.DirFS("/"))
		if got, want := node.Labels[v1.KVMLabel], strconv.FormatBool(hostKVM.Usable); got != want {
			t.Errorf("node label %s = %q, want %q (%s)", v1.KVMLabel, got, want, hostKVM.Reason)
		}
		if got.Status.Accelerator != v1.AcceleratorTCG {
			t.Errorf("masq status.accelerator = %q, want TCG", got.Status.Accelerator)
		}
	})

	t.Run("PrelaunchBeforeScheduled", func(t *testing.T) { testPrelaunch(t, h) })

	t.Run("GuestNetworkAndCloudInit", func(t *testing.T) {
		if l := masq.waitSerial(t, "NODEVIRT-GUEST-DHCP", 60*time.Second); l != "NODEVIRT-GUEST-DHCP ip=10.0.2.2/24 gw=10.0.2.1" {
			t.Errorf("masquerade guest: %q", l)
		}
		if l := bridge.waitSerial(t, "NODEVIRT-GUEST-DHCP", 60*time.Second); l != "NODEVIRT-GUEST-DHCP ip=10.244.0.5/24 gw=10.244.0.1" {
			t.Errorf("bridge guest: %q", l)
		}
		for _, v := range []*vm{masq, bridge} {
			if l := v.waitSerial(t, "NODEVIRT-GUEST-GW", 60*time.Second); l != "NODEVIRT-GUEST-GW-OK" {
				t.Errorf("VM %s: %q", v.name, l)
			}
		}
		masq.waitSerial(t, "NODEVIRT-USERDATA-END", 60*time.Second)
		if _, ok := masq.serial.line("hello-from-userdata"); !ok {
			t.Errorf("user-data output missing; console:\n%s", masq.serial)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("SurvivesAgentKills", func(t *testing.T) {
		type snapshot struct {
			pid    int
			uptime float64
			status v1.VirtualMachineInstanceStatus
		}
		for _, v := range vms {
			testenv.Eventually(t, 60*time.Second, "guest agent of "+v.name, func() bool {
				vmi := v.get()
				return vmi != nil && conditionIs(vmi, v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue)
			})
		}
		before := map[string]snapshot{}
		for _, v := range vms {
			before[v.name] = snapshot{pid: v.qemuPID(t), status: v.get().Status}
		}
		var adopt, ready, dhcp []time.Duration
		loopStart := h.agentLogSize()
		for i := range 10 {
			h.killAgent()
			for _, v := range vms {
				up := v.guestUptime(t)
				if prev := before[v.name].uptime; up <= prev {
					t.Fatalf("kill %d: VM %s uptime %.2f after %.2f: the guest restarted", i, v.name, up, prev)
				}
				s := before[v.name]
				s.uptime = up
				before[v.name] = s
			}
			off := h.agentLogSize()
			start := h.startAgent(t)
			testenv.Eventually(t, 20*time.Second, "/readyz of the restarted agent", h.readyz)
			ready = append(ready, time.Since(start))
			// Ready means every VM of the store was synced once, each
			// re-attached here.
			if n := len(h.agentLogLines(off, "domain attached")); n < len(vms) {
				t.Errorf("kill %d: /readyz answered 200 with %d of %d VMs re-attached", i, n, len(vms))
			}
			testenv.Eventually(t, 20*time.Second, "re-adoption of every VM", func() bool {
				return len(h.agentLogLines(off, "domain attached")) >= len(vms)
			})
			adopt = append(adopt, time.Since(start))
			for _, v := range []*vm{masq, bridge} {
				testenv.Eventually(t, 5*time.Second, "DHCP server of "+v.name, v.dhcpListening)
				dhcp = append(dhcp, time.Since(start))
			}
			for _, v := range vms {
				if pid := v.qemuPID(t); pid != before[v.name].pid {
					t.Fatalf("kill %d: VM %s QEMU pid %d, was %d", i, v.name, pid, before[v.name].pid)
				}
			}
		}
		// Watch a little longer: a late re-attach must not patch anything either.
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) && !t.Failed() {
			for _, v := range vms {
				if diff := cmp.Diff(before[v.name].status, v.get().Status); diff != "" {
					t.Errorf("VM %s status changed across agent restarts (-before +after):\n%s", v.name, diff)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		if patched := h.agentLogLines(loopStart, "status patched"); len(patched) > 0 {
			t.Errorf("the restarted agents patched VMI status %d times: %v", len(patched), patched)
		}
		t.Logf("re-adoption (agent start → all QMP re-attached, seen after /readyz): median %v, max %v", median(adopt), slices.Max(adopt))
		t.Logf("agent start → /readyz 200: median %v, max %v", median(ready), slices.Max(ready))
		t.Logf("DHCP serving again after agent start: median %v, max %v", median(dhcp), slices.Max(dhcp))
		if m := slices.Max(dhcp); m > 3*time.Second {
			t.Errorf("DHCP took %v to come back after an agent restart", m)
		}
	})

	t.Run("KilledQEMUFails", func(t *testing.T) {
		pid := plain.qemuPID(t)
		killed := time.Now()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		plain.waitPhase(t, v1.Failed, 10*time.Second)
		t.Logf("SIGKILLed QEMU → Failed in %v", time.Since(killed).Round(time.Millisecond))
		h.wantEvent(t, plain, corev1.EventTypeWarning, "Stopped")
	})

	t.Run("OrphanRecordMarkedGone", func(t *testing.T) {
		// The VMI vanishes (finalizer removed by hand) and its QEMU dies
		// while the agent is down: the restarted agent marks the record gone.
		h.killAgent()
		bridge.killLauncher()
		patch := []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`)
		vmis := h.virt.KubevirtV1().VirtualMachineInstances(h.ns)
		if _, err := vmis.Patch(context.Background(), bridge.name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := vmis.Delete(context.Background(), bridge.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		off := h.agentLogSize()
		h.startAgent(t)
		testenv.Eventually(t, 10*time.Second, "record of the vanished VMI marked gone", func() bool {
			for _, l := range h.agentLogLines(off, "record marked gone") {
				if l["vmi"] == h.ns+"/"+bridge.name {
					return true
				}
			}
			return false
		})
	})

	t.Run("DeleteShutsDownGuest", func(t *testing.T) {
		phases := masq.deleteAndWatch(t, 60*time.Second)
		if !slices.Contains(phases, v1.Succeeded) {
			t.Errorf("phases seen while deleting: %v, want Succeeded", phases)
		}
		masq.waitSerial(t, "NODEVIRT-GUEST-POWERDOWN", time.Second)
		b, err := os.ReadFile(masq.pod.Socket(podfs.ExitFile))
		if err != nil || !strings.Contains(string(b), `"guestShutdown":true`) {
			t.Errorf("qemu-exit.json = %s, %v; want a guest shutdown", b, err)
		}
		tap := netsetup.LinkName("nvtap", "default")
		if out, err := exec.Command("ip", "-n", masq.netns, "link", "show", tap).CombinedOutput(); err == nil {
			t.Errorf("tap %s still exists after deletion:\n%s", tap, out)
		}
	})

	t.Run("DeleteIgnoredACPIStopsAfterGrace", func(t *testing.T) {
		v := h.createVM(t, "stubborn", vmOpts{ignoreACPI: true, grace: 3})
		v.waitPhase(t, v1.Running, 60*time.Second)
		v.waitSerial(t, "NODEVIRT-GUEST-READY", 90*time.Second)
		start := time.Now()
		v.deleteAndWatch(t, 30*time.Second)
		took := time.Since(start)
		t.Logf("guest ignoring ACPI stopped and VMI gone %v after deletion (grace 3s)", took.Round(time.Millisecond))
		if took < 3*time.Second || took > 15*time.Second {
			t.Errorf("deletion took %v, want about the 3s grace period", took)
		}
	})

	t.Run("LauncherPodDeleted", func(t *testing.T) {
		v := h.createVM(t, "evicted", vmOpts{})
		v.waitPhase(t, v1.Running, 60*time.Second)
		// acpid starts after the ready marker: wait until the guest is
		// fully up (its agent answers) so the power button is heard.
		testenv.Eventually(t, 90*time.Second, "guest agent of evicted", func() bool {
			vmi := v.get()
			return vmi != nil && conditionIs(vmi, v1.VirtualMachineInstanceAgentConnected, corev1.ConditionTrue)
		})
		pods := h.kube.CoreV1().Pods(h.ns)
		ctx := context.Background()
		// The kubelet's part: the pod is marked for deletion, the compute
		// container gets SIGTERM, and once it exited the pod object goes.
		if err := pods.Delete(ctx, v.podName, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, 10*time.Second, "Ready=False PodTerminating", func() bool {
			vmi := v.get()
			return vmi != nil && conditionIs(vmi, v1.VirtualMachineInstanceReady, corev1.ConditionFalse)
		})
		wantCond(t, v.get(), v1.VirtualMachineInstanceReady, corev1.ConditionFalse, v1.ReasonPodTerminating)
		if err := v.launcher.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-v.exited:
		case <-time.After(60 * time.Second):
			t.Fatal("launcher did not exit after SIGTERM")
		}
		zero := int64(0)
		if err := pods.Delete(ctx, v.podName, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		v.waitPhase(t, v1.Succeeded, 10*time.Second)
	})

	t.Run("Scale", func(t *testing.T) {
		n := 3
		if s := os.Getenv("NODEVIRT_AGENT_TEST_VMS"); s != "" {
			var err error
			if n, err = strconv.Atoi(s); err != nil {
				t.Fatal(err)
			}
		}
		var lat []time.Duration
		for i := range n {
			v := h.createVM(t, "scale-"+strconv.Itoa(i), vmOpts{})
			v.waitPhase(t, v1.Running, 60*time.Second)
			lat = append(lat, time.Since(v.created))
		}
		t.Logf("Scheduled→Running latency over %d VMs: median %v, max %v", n, median(lat), slices.Max(lat))
		t.Logf("agent RSS with %d more VMs running: %d KiB", n, vmRSS(t, h.agentPID()))
	})

	t.Run("StoreRecords", func(t *testing.T) {
		h.stopAgent()
		db, err := store.Open(h.db, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		recs, err := db.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]store.Record{}
		for _, r := range recs {
			byName[r.Name] = r
		}
		for _, name := range []string{"masq", "bridge", "stubborn"} {
			if r := byName[name]; !r.IsGone() {
				t.Errorf("record of deleted VMI %s is not marked gone: %+v", name, r)
			}
		}
		if r := byName["plain"]; r.IsGone() || r.Observed.Finished.IsZero() {
			t.Errorf("record of the crashed VMI: gone %v, finished %v; want live and released", r.IsGone(), r.Observed.Finished)
		} else if r.Observed.Phase != string(v1.Failed) {
			t.Errorf("record of the crashed VMI has observed phase %q, want Failed", r.Observed.Phase)
		}
		tl, err := db.Timeline(context.Background(), byName["masq"].UID)
		if err != nil {
			t.Fatal(err)
		}
		var reasons []string
		for _, e := range tl {
			reasons = append(reasons, e.Reason)
		}
		for _, want := range []string{"Adopted", "NetworkAllocated", "Launching", "Attached", "PhaseRunning", "ShuttingDown", "Released", "Deleted"} {
			if !slices.Contains(reasons, want) {
				t.Errorf("masq timeline %v lacks %s", reasons, want)
			}
		}
	})
}

func wantCond(t *testing.T, vmi *v1.VirtualMachineInstance, typ v1.VirtualMachineInstanceConditionType, s corev1.ConditionStatus, reason string) {
	t.Helper()
	for _, c := range vmi.Status.Conditions {
		if c.Type == typ {
			if c.Status != s || c.Reason != reason {
				t.Errorf("VMI %s condition %s = %s/%q, want %s/%q", vmi.Name, typ, c.Status, c.Reason, s, reason)
			}
			return
		}
	}
	t.Errorf("VMI %s has no condition %s; conditions: %+v", vmi.Name, typ, vmi.Status.Conditions)
}

func conditionIs(vmi *v1.VirtualMachineInstance, typ v1.VirtualMachineInstanceConditionType, s corev1.ConditionStatus) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == typ {
			return c.Status == s
		}
	}
	return false
}

// wantEvent waits for an event of the given type and reason on the VMI.
func (h *harness) wantEvent(t *testing.T, v *vm, typ, reason string) {
	t.Helper()
	sel := fields.Set{"involvedObject.name": v.name, "reason": reason, "type": typ}.AsSelector().String()
	testenv.Eventually(t, 10*time.Second, "event "+reason+" on "+v.name, func() bool {
		evs, err := h.kube.CoreV1().Events(h.ns).List(context.Background(), metav1.ListOptions{FieldSelector: sel})
		return err == nil && len(evs.Items) > 0
	})
}

// deleteAndWatch deletes the VMI and returns the phases it went through
// until it disappeared from the API.
func (v *vm) deleteAndWatch(t *testing.T, timeout time.Duration) []v1.VirtualMachineInstancePhase {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cur := v.get()
	w, err := v.h.virt.KubevirtV1().VirtualMachineInstances(v.h.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", v.name).String(), ResourceVersion: cur.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if err := v.h.virt.KubevirtV1().VirtualMachineInstances(v.h.ns).Delete(ctx, v.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var phases []v1.VirtualMachineInstancePhase
	for ev := range w.ResultChan() {
		vmi, ok := ev.Object.(*v1.VirtualMachineInstance)
		if !ok {
			continue
		}
		if len(phases) == 0 || phases[len(phases)-1] != vmi.Status.Phase {
			phases = append(phases, vmi.Status.Phase)
		}
		if ev.Type == watch.Deleted {
			return phases
		}
	}
	t.Fatalf("VMI %s not gone after %v; phases seen %v", v.name, timeout, phases)
	return nil
}

// guestUptime reads /proc/uptime through the guest agent. Call it only
// while the node agent is down: qga.sock takes one client at a time.
func (v *vm) guestUptime(t *testing.T) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := dial(ctx, v.pod.Socket(podfs.GuestAgentSock))
	if err != nil {
		t.Fatalf("VM %s: %v", v.name, err)
	}
	ga := qmp.NewAgent(nc, "qga")
	defer ga.Close()
	st, err := ga.Run(ctx, "/bin/cat", "/proc/uptime")
	if err != nil {
		t.Fatalf("VM %s: guest-exec: %v", v.name, err)
	}
	f := strings.Fields(string(st.OutData))
	if len(f) == 0 {
		t.Fatalf("VM %s: /proc/uptime = %q", v.name, st.OutData)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

// dhcpListening reports whether a DHCP server socket is open in the VM's netns.
func (v *vm) dhcpListening() bool {
	out, err := exec.Command("ip", "netns", "exec", v.netns, "ss", "-Hlun", "sport", "=", ":67").Output()
	return err == nil && strings.TrimSpace(string(out)) != ""
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// vmRSS is VmRSS of pid in KiB.
func vmRSS(t *testing.T, pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return n
		}
	}
	return 0
}
