package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/node/storeguard"
)

// TestStoreFull_Integration: the real agent with its bbolt file on a
// 16 MiB tmpfs that fills up (issue 18's full-disk fault). While less than
// --store-min-free is free the node takes no new VMI — the new one stays
// Scheduled without a record, warned NodeStoreFull, the node is marked
// unschedulable with its NodevirtStoreFull condition True — and the
// running VM goes on (same QEMU, pause and unpause work), also with the
// filesystem filled to the last byte. Once the space is back the new VMI
// starts and the node is schedulable again.
func TestStoreFull_Integration(t *testing.T) {
	h := newHarness(t)
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	// Lazily: the agent (stopped by an earlier cleanup, which runs later)
	// may still hold its file open.
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	h.db = filepath.Join(dir, "agent.db")
	h.agentArgs = append(h.agentArgs, "--store-min-free=4Mi", "--heartbeat-interval=1s")
	h.startAgent(t)

	running := h.createVM(t, "running", vmOpts{})
	running.waitPhase(t, v1.Running, 2*time.Minute)
	pid := running.qemuPID(t)
	h.waitNode(t, "schedulable, store condition False", func(n *corev1.Node) bool {
		return n.Labels[v1.SchedulableLabel] == "true" && storeguard.NodeCondition(n) == corev1.ConditionFalse
	})

	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, free-2<<20), 0o600); err != nil {
		t.Fatalf("fill the store's filesystem (%d bytes free): %v", free, err)
	}
	h.waitNode(t, "unschedulable, store condition True", func(n *corev1.Node) bool {
		return n.Labels[v1.SchedulableLabel] == "false" && storeguard.NodeCondition(n) == corev1.ConditionTrue
	})

	refused := h.createVM(t, "refused", vmOpts{})
	h.wantEvent(t, refused, corev1.EventTypeWarning, agent.EventNodeStoreFull)
	c := api.NewClient(h.apiSocket)
	if _, err := c.Domain(h.ctx, refused.ref()); err == nil {
		t.Errorf("the refused VMI has a record")
	}
	if p := refused.get().Status.Phase; p != v1.Scheduled {
		t.Errorf("refused VMI phase %s, want Scheduled", p)
	}
	// The running VM is served: pause and unpause write its record.
	for _, pause := range []bool{true, false} {
		running.mustCall(t, http.MethodPut, map[bool]string{true: "pause", false: "unpause"}[pause])
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("Paused=%v", pause), func() bool {
			return conditionIs(running.get(), v1.VirtualMachineInstancePaused, corev1.ConditionTrue) == pause
		})
	}
	if got := running.qemuPID(t); got != pid {
		t.Errorf("running VM's QEMU pid %d -> %d while the store was full", pid, got)
	}

	// Filled to the last byte: the agent keeps running and serving, and
	// so does the VM (its QEMU needs nothing of the store).
	agentPID := h.agentPID()
	last := filepath.Join(dir, "last")
	if err := os.WriteFile(last, make([]byte, 4<<20), 0o600); err == nil {
		t.Fatal("4 MiB more fitted into the full filesystem")
	}
	time.Sleep(3 * time.Second) // a few reconciles and heartbeats
	if _, err := c.Domains(h.ctx); err != nil {
		t.Errorf("node API with the filesystem at 0 bytes free: %v", err)
	}
	if got := h.agentPID(); got != agentPID || unix.Kill(agentPID, 0) != nil {
		t.Errorf("agent pid %d -> %d with the filesystem at 0 bytes free (crashed?)", agentPID, got)
	}
	if got := running.qemuPID(t); got != pid {
		t.Errorf("running VM's QEMU pid %d -> %d with the filesystem at 0 bytes free", pid, got)
	}
	if p := running.get().Status.Phase; p != v1.Running {
		t.Errorf("running VM phase %s with the filesystem at 0 bytes free", p)
	}

	for _, f := range []string{filler, last} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	refused.waitPhase(t, v1.Running, 2*time.Minute)
	h.waitNode(t, "schedulable again, store condition False", func(n *corev1.Node) bool {
		return n.Labels[v1.SchedulableLabel] == "true" && storeguard.NodeCondition(n) == corev1.ConditionFalse
	})
}

// waitNode waits for the test node to satisfy cond.
func (h *harness) waitNode(t *testing.T, what string, cond func(*corev1.Node) bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, "node "+what, func() error {
		n, err := h.kube.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !cond(n) {
			return fmt.Errorf("labels %v, conditions %+v", n.Labels, n.Status.Conditions)
		}
		return nil
	})
}
