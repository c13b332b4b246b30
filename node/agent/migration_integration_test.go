package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
	"github.com/nodevirt/nodevirt/node/podfs"
)

// uptimeLoop prints the guest's uptime on the console every 200 ms: the
// lines continue on the target's console after a live migration, with
// larger values (no reboot).
const uptimeLoop = `#!/bin/sh
(while :; do echo "NODEVIRT-UPTIME $(cut -d' ' -f1 /proc/uptime)"; sleep 0.2; done) &
`

// diskPattern is what the guest writes at 1 MiB into its emptyDisk (the
// second virtio disk) before the migrations: node-local data the
// migrations must carry to each target's fresh disk.
const diskPattern = "NODEVIRT-DISK-PATTERN"

const writeDisk = "printf " + diskPattern + " | dd of=/dev/vdb bs=512 seek=2048 conv=fsync 2>/dev/null && echo NODEVIRT-DISK-WRITTEN\n"

// scratchHolds reports whether the emptyDisk image of pod holds
// diskPattern at 1 MiB.
func scratchHolds(t *testing.T, pod podfs.Pod) bool {
	t.Helper()
	f, err := os.Open(filepath.Join(pod.PrivateDir(), "empty", "scratch.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, len(diskPattern))
	if _, err := f.ReadAt(b, 1<<20); err != nil {
		t.Fatal(err)
	}
	return string(b) == diskPattern
}

// TestMigration_Integration runs two agents (nodes node1 and node2, each
// with its own bbolt file, kubelet root, certificate and migration channel)
// against one API server and real launchers and QEMU; the test plays the
// migration controller (docs/migration.md). It aborts a migration, kills
// the target agent and then the source agent mid-migration (each time the
// guest stays on node1, the target QEMU goes), and finally migrates the
// guest node1 → node2 and back, measuring QMP's downtime.
func TestMigration_Integration(t *testing.T) {
	h := newHarness(t)
	a, b := h.migNode(t, testNode), h.migNode(t, "node2")
	a.start(t)
	b.start(t)

	v := h.createVM(t, "mig", vmOpts{binding: "masquerade", userData: uptimeLoop + writeDisk, scratch: "16Mi"})
	v.waitPhase(t, v1.Running, 60*time.Second)
	v.waitSerial(t, "NODEVIRT-UPTIME", 120*time.Second)
	v.waitSerial(t, "NODEVIRT-DISK-WRITTEN", 60*time.Second)
	wantCond(t, v.get(), v1.VirtualMachineInstanceIsMigratable, corev1.ConditionTrue, "")
	uid := string(v.get().UID)

	// The agent migrates a running guest under KVM and a stopped one
	// under TCG (agent.transferMode).
	wantMode := v1.MigrationPreCopy
	if !convert.DetectKVM(os.DirFS("/")).Usable {
		wantMode = v1.MigrationPaused
	}
	// 1 MiB/s: the guest's ~30 MiB of non-zero memory take long enough to
	// act in the middle of the migration.
	slow := resource.MustParse("1Mi")
	slowCfg := &v1.MigrationConfiguration{BandwidthPerMigration: &slow}

	// guestStaysOnA checks the guest still runs on node1 after a failed
	// migration: its uptime lines go on, and the VMI is Running on node1.
	guestStaysOnA := func(t *testing.T, m *migration, off int64) {
		t.Helper()
		before := v.serial.lastUptime()
		testenv.Eventually(t, 20*time.Second, "guest uptime on node1 advancing", func() bool {
			return v.serial.lastUptime() > before+1
		})
		vmi := v.get()
		if vmi.Status.Phase != v1.Running || vmi.Labels[v1.NodeNameLabel] != testNode {
			t.Errorf("VMI phase %s on %q, want Running on %s", vmi.Status.Phase, vmi.Labels[v1.NodeNameLabel], testNode)
		}
		if v.qemuExited() {
			t.Errorf("source QEMU exited")
		}
		m.cleanupFailed(t)
		testenv.Eventually(t, 30*time.Second, "target QEMU gone", m.tgt.qemuExited)
		testenv.Eventually(t, 30*time.Second, "target record tombstoned", func() bool {
			return b.logSays(off, "record marked gone", "uid", uid)
		})
		if m.tgt.serial.count("NODEVIRT-UPTIME") != 0 {
			t.Errorf("the guest ran on the target")
		}
	}
	start := func(t *testing.T, cfg *v1.MigrationConfiguration) *migration {
		t.Helper()
		m := &migration{uid: newMigrationUID(), source: a, target: b, vm: v}
		m.tgt = b.targetPod(t, v, m.uid)
		m.begin(t, cfg)
		m.waitState(t, 60*time.Second, "target ready", func(ms *v1.VirtualMachineInstanceMigrationState) bool {
			return ms.TargetNodeAddress == b.migAddr && ms.TargetNodeDomainReadyTimestamp != nil
		})
		m.waitState(t, 30*time.Second, "migration started in mode "+string(wantMode), func(ms *v1.VirtualMachineInstanceMigrationState) bool {
			return ms.StartTimestamp != nil && ms.Mode == wantMode
		})
		time.Sleep(time.Second) // in flight
		if ms := m.state(); ms.Completed || ms.Failed {
			t.Fatalf("migration ended within a second at 1 MiB/s: %+v", ms)
		}
		return m
	}

	t.Run("Abort", func(t *testing.T) {
		off := b.logSize()
		m := start(t, slowCfg)
		for _, c := range v.get().Status.Conditions {
			if c.Type == v1.VirtualMachineInstancePaused && c.Status == corev1.ConditionTrue {
				t.Errorf("Paused=True during the transfer (%s: %s): the user did not pause the VMI", c.Reason, c.Message)
			}
		}
		v.updateStatus(t, func(s *v1.VirtualMachineInstanceStatus) { s.MigrationState.AbortRequested = true })
		ms := m.waitState(t, 30*time.Second, "aborted", func(ms *v1.VirtualMachineInstanceMigrationState) bool {
			return ms.Failed && ms.EndTimestamp != nil
		})
		if ms.AbortStatus != v1.MigrationAbortSucceeded || ms.Completed {
			t.Errorf("abortStatus %q completed %v, want Succeeded and not completed", ms.AbortStatus, ms.Completed)
		}
		guestStaysOnA(t, m, off)
	})
	if t.Failed() {
		return
	}

	t.Run("TargetAgentKilled", func(t *testing.T) {
		off := b.logSize()
		m := start(t, slowCfg)
		b.kill()
		ms := m.waitState(t, 60*time.Second, "failed", func(ms *v1.VirtualMachineInstanceMigrationState) bool { return ms.Failed })
		t.Logf("failure reason: %s", ms.FailureReason)
		b.start(t)
		guestStaysOnA(t, m, off)
	})

	t.Run("SourceAgentKilled", func(t *testing.T) {
		off := b.logSize()
		m := start(t, slowCfg)
		a.kill()
		time.Sleep(500 * time.Millisecond)
		a.start(t)
		ms := m.waitState(t, 60*time.Second, "failed", func(ms *v1.VirtualMachineInstanceMigrationState) bool { return ms.Failed })
		t.Logf("failure reason: %s", ms.FailureReason)
		guestStaysOnA(t, m, off)
	})
	if t.Failed() {
		return
	}

	var onB *migration
	top := t // the pods the guest moves to outlive their subtest
	t.Run("AToB", func(t *testing.T) {
		off := a.logSize()
		m := &migration{uid: newMigrationUID(), source: a, target: b, vm: v}
		onB = m
		m.tgt = b.targetPod(top, v, m.uid)
		began := time.Now()
		m.begin(t, nil)
		ms := m.waitState(t, 120*time.Second, "completed and detected", func(ms *v1.VirtualMachineInstanceMigrationState) bool {
			return ms.Completed && ms.TargetNodeDomainDetected
		})
		total := time.Since(began)
		if ms.Failed || ms.EndTimestamp == nil || ms.StartTimestamp == nil {
			t.Errorf("migrationState %+v", ms)
		}
		lastOnA := v.serial.lastUptime()
		m.handoff(t)
		handedOff := time.Now()
		testenv.Eventually(t, 30*time.Second, "source QEMU gone", v.qemuExited)
		testenv.Eventually(t, 30*time.Second, "source record tombstoned", func() bool {
			return a.logSays(off, "record marked gone", "uid", uid)
		})
		testenv.Eventually(t, 20*time.Second, "guest uptime on node2", func() bool {
			return m.tgt.serial.lastUptime() > lastOnA
		})
		if first := m.tgt.serial.firstUptime(); first < lastOnA-0.5 {
			t.Errorf("first uptime on node2 %.2f, last on node1 %.2f: the guest restarted", first, lastOnA)
		}
		if m.tgt.serial.count("NODEVIRT-GUEST-READY") != 0 {
			t.Errorf("the guest booted on node2:\n%s", m.tgt.serial)
		}
		var page string
		testenv.Eventually(t, 30*time.Second, "guest HTTP on node2", func() bool {
			out, err := guestHTTP(m.tgt.netns)
			page = out
			return err == nil && strings.HasPrefix(out, "nodevirt-guest")
		})
		vmi := v.get()
		if vmi.Status.Phase != v1.Running {
			t.Errorf("phase %s after the handoff", vmi.Status.Phase)
		}
		wantCond(t, vmi, v1.VirtualMachineInstanceReady, corev1.ConditionTrue, "")
		// The guest's qemu-ga had its port open before it moved: no port
		// event on node2, its agent must reach it on the guest's arrival.
		if !scratchHolds(t, m.tgt.pod) {
			t.Errorf("node2's emptyDisk lacks what the guest wrote on node1: the disk mirror did not carry it")
		}
		ga := b.waitGuestAgent(t, v, handedOff, 4*time.Second)
		t.Logf("node1 → node2: QMP downtime %d ms, QMP total %d ms, begin → completed+detected %v; handoff → guest agent on node2 %v; guest page %q",
			a.logInt("migration completed", "downtimeMs"), a.logInt("migration completed", "totalMs"), total.Round(time.Millisecond),
			ga.Round(time.Millisecond), strings.TrimSpace(page))
	})
	if t.Failed() {
		return
	}

	// Back to node1, where the first launcher pod is now completed and the
	// record of the first run is a tombstone: the new target pod and a new
	// record are chosen.
	var onA *migration
	t.Run("BToA", func(t *testing.T) {
		markSucceeded(t, h, v.podName)
		off := b.logSize()
		m := &migration{uid: newMigrationUID(), source: b, target: a, vm: v}
		onA = m
		m.tgt = a.targetPod(top, v, m.uid)
		m.begin(t, nil)
		ms := m.waitState(t, 120*time.Second, "completed and detected", func(ms *v1.VirtualMachineInstanceMigrationState) bool {
			return ms.Completed && ms.TargetNodeDomainDetected
		})
		if ms.Failed {
			t.Errorf("migrationState %+v", ms)
		}
		lastOnB := onB.tgt.serial.lastUptime()
		m.handoff(t)
		handedOff := time.Now()
		testenv.Eventually(t, 30*time.Second, "node2 QEMU gone", onB.tgt.qemuExited)
		testenv.Eventually(t, 30*time.Second, "node2 record tombstoned", func() bool {
			return b.logSays(off, "record marked gone", "uid", uid)
		})
		testenv.Eventually(t, 20*time.Second, "guest uptime on node1 again", func() bool {
			return m.tgt.serial.lastUptime() > lastOnB
		})
		if m.tgt.serial.count("NODEVIRT-GUEST-READY") != 0 {
			t.Errorf("the guest booted on node1:\n%s", m.tgt.serial)
		}
		testenv.Eventually(t, 30*time.Second, "guest HTTP on node1", func() bool {
			out, err := guestHTTP(m.tgt.netns)
			return err == nil && strings.HasPrefix(out, "nodevirt-guest")
		})
		if vmi := v.get(); vmi.Status.Phase != v1.Running {
			t.Errorf("phase %s after the handoff", vmi.Status.Phase)
		}
		if !scratchHolds(t, m.tgt.pod) {
			t.Errorf("node1's new emptyDisk lacks the guest's data after the way back")
		}
		ga := a.waitGuestAgent(t, v, handedOff, 4*time.Second)
		t.Logf("node2 → node1: QMP downtime %d ms, QMP total %d ms; handoff → guest agent on node1 %v",
			b.logInt("migration completed", "downtimeMs"), b.logInt("migration completed", "totalMs"), ga.Round(time.Millisecond))
	})
	if t.Failed() {
		return
	}

	// Last, as it ends the VMI: the target is lost after the source
	// completed, and the controller ends the migration without a handoff
	// (target label removed, target pod deleted). The source QEMU, in
	// postmigrate, must not run the guest again: the source agent fails
	// the VMI and quits it, and the target's QEMU goes too.
	t.Run("TargetLostAfterCompletion", func(t *testing.T) {
		markSucceeded(t, h, onB.tgt.podName)
		src := onA.tgt
		off := a.logSize()
		m := &migration{uid: newMigrationUID(), source: a, target: b, vm: v}
		m.tgt = b.targetPod(top, v, m.uid)
		m.begin(t, nil)
		m.waitState(t, 120*time.Second, "completed", func(ms *v1.VirtualMachineInstanceMigrationState) bool { return ms.Completed })
		lastOnA := src.serial.lastUptime()
		m.cleanupFailed(t)
		vmi := v.waitPhase(t, v1.Failed, 30*time.Second)
		if vmi.Labels[v1.NodeNameLabel] != testNode {
			t.Errorf("VMI on %q, want still %s (no handoff)", vmi.Labels[v1.NodeNameLabel], testNode)
		}
		testenv.Eventually(t, 30*time.Second, "source QEMU gone", src.qemuExited)
		testenv.Eventually(t, 30*time.Second, "target QEMU gone", m.tgt.qemuExited)
		if !a.logSays(off, "status patched", "phase", "Failed") {
			t.Errorf("node1's agent did not patch the VMI Failed")
		}
		if up := src.serial.lastUptime(); up > lastOnA+0.5 {
			t.Errorf("guest uptime on node1 went on after the transfer (%.2f → %.2f): the source resumed the guest", lastOnA, up)
		}
	})
}

// markSucceeded sets a launcher pod's phase to Succeeded, as the kubelet
// does when its launcher exits after the handoff.
func markSucceeded(t *testing.T, h *harness, name string) {
	t.Helper()
	pod, err := h.kube.CoreV1().Pods(h.ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	if _, err := h.kube.CoreV1().Pods(h.ns).UpdateStatus(h.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
