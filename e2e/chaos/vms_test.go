package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

// victim is the VM whose launcher and QEMU the faults kill.
const victim = "victim"

// readyMarker is the line the test guest prints on its serial console once
// booted: more than one in a QEMU's log is a reboot.
const readyMarker = "NODEVIRT-GUEST-READY"

// baseline is a resident's identity, taken once it runs: the VMI, its
// launcher pod and QEMU process must stay these for the whole run.
type baseline struct {
	vmi  types.UID
	pod  corev1.Pod
	qemu int
}

// vmManifest is a runStrategy Always VM of the test guest on node ("":
// any): masquerade on the pod network (its guest serves HTTP on port 80)
// and a guest that keeps writing a scratch disk.
func (h *harness) vmManifest(name, role, node string) []byte {
	selector := ""
	if node != "" {
		selector = fmt.Sprintf("nodeSelector: {kubernetes.io/hostname: %s}", node)
	}
	return fmt.Appendf(nil, `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: %[1]s, namespace: %[2]s, labels: {chaos-role: %[3]s}}
spec:
  runStrategy: Always
  template:
    metadata: {labels: {chaos-vm: %[1]s}}
    spec:
      %[4]s
      terminationGracePeriodSeconds: 5
      domain:
        memory: {guest: 128Mi}
        firmware:
          kernelBoot:
            kernelArgs: console=ttyS0 quiet panic=-1
            container: {image: nodevirt.local/guest-kernel:dev, kernelPath: /boot/vmlinux, initrdPath: /boot/initrd.img}
        devices:
          autoattachGraphicsDevice: false
          disks:
          - {name: cloudinit, disk: {bus: virtio}}
          - {name: scratch, disk: {bus: virtio}}
          interfaces:
          - {name: default, masquerade: {}}
      networks:
      - {name: default, pod: {}}
      volumes:
      - name: cloudinit
        cloudInitNoCloud:
          userData: |
            #!/bin/sh
            ( while :; do dd if=/dev/urandom of=/dev/vdb bs=64k count=16 conv=fsync 2>/dev/null; sleep 1; done ) </dev/null >/dev/null 2>&1 &
      - name: scratch
        emptyDisk: {capacity: 16Mi}
`, name, namespace, role, selector)
}

// startResidents starts the residents and the victim and takes the
// residents' baselines once their guests booted.
func (h *harness) startResidents(t *testing.T) {
	t.Helper()
	names := []string{victim}
	for i := range residents {
		names = append(names, fmt.Sprintf("resident-%d", i))
	}
	for _, n := range names {
		role := "resident"
		if n == victim {
			role = victim
		}
		if _, err := h.cluster.KubectlText(time.Minute, h.vmManifest(n, role, h.node.Name), "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		b, err := h.booted(t.Context(), n, "", 4*time.Minute)
		if err != nil {
			t.Fatalf("VM %s: %v", n, err)
		}
		if n != victim {
			h.residents[n] = b
			// Its guest serves HTTP a moment after the ready marker; the
			// probes count from then.
			if err := await(t.Context(), 2*time.Minute, func() error { return httpOK(t.Context(), b.pod.Status.PodIP) }); err != nil {
				t.Fatalf("resident %s: guest HTTP: %v", n, err)
			}
		}
		t.Logf("VM %s: VMI %s, pod %s, QEMU pid %d", n, b.vmi, b.pod.Name, b.qemu)
	}
}

// booted waits for VM name's VMI (other than UID old) to run with a booted
// guest and returns its identity.
func (h *harness) booted(ctx context.Context, name string, old types.UID, timeout time.Duration) (baseline, error) {
	var b baseline
	err := await(ctx, timeout, func() error {
		vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if vmi.UID == old || vmi.Status.Phase != v1.Running {
			return fmt.Errorf("VMI %s %s phase %q", name, vmi.UID, vmi.Status.Phase)
		}
		pod, err := h.launcherPod(ctx, vmi)
		if err != nil {
			return err
		}
		n, err := h.boots(pod)
		if err != nil || n == 0 {
			return fmt.Errorf("guest of %s not booted yet (%v)", name, err)
		}
		pid, err := qemuOf(pod)
		if err != nil {
			return err
		}
		b = baseline{vmi: vmi.UID, pod: pod, qemu: pid}
		return nil
	})
	return b, err
}

// launcherPod is the live launcher pod of vmi.
func (h *harness) launcherPod(ctx context.Context, vmi *v1.VirtualMachineInstance) (corev1.Pod, error) {
	pods, err := h.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
	if err != nil {
		return corev1.Pod{}, err
	}
	for _, p := range pods.Items {
		h.mu.Lock()
		h.launchers[string(p.UID)] = true
		h.mu.Unlock()
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return corev1.Pod{}, fmt.Errorf("no running launcher pod of VMI %s/%s", vmi.Name, vmi.UID)
}

// boots counts the guest's boots in the pod's serial log.
func (h *harness) boots(pod corev1.Pod) (int, error) {
	b, err := os.ReadFile(filepath.Join(h.node.KubeletRoot, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "sockets", "serial.log"))
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), readyMarker), nil
}

// qemuOf is the QEMU process of a launcher pod.
func qemuOf(pod corev1.Pod) (int, error) { return localcluster.PodQEMU(string(pod.UID)) }

// checkResidents compares every resident with its baseline: same VMI,
// Running, not paused, same QEMU process, booted once.
func (h *harness) checkResidents(ctx context.Context) []string {
	var out []string
	for name, b := range h.residents {
		vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("resident %s: get VMI: %v", name, err))
		case vmi.UID != b.vmi:
			out = append(out, fmt.Sprintf("resident %s: VMI replaced (%s -> %s)", name, b.vmi, vmi.UID))
		case vmi.Status.Phase != v1.Running:
			out = append(out, fmt.Sprintf("resident %s: VMI phase %s", name, vmi.Status.Phase))
		case conditionTrue(vmi, v1.VirtualMachineInstancePaused):
			out = append(out, fmt.Sprintf("resident %s: Paused=True", name))
		}
		pid, err := qemuOf(b.pod)
		if err != nil || pid != b.qemu {
			out = append(out, fmt.Sprintf("resident %s: QEMU pid %d -> %d (%v)", name, b.qemu, pid, err))
		}
		if n, err := h.boots(b.pod); err != nil || n != 1 {
			out = append(out, fmt.Sprintf("resident %s: guest booted %d times (%v)", name, n, err))
		}
	}
	return out
}

// watchResidents polls the residents' VMIs and the node every second
// until ctx ends: a phase or Paused change between two faults' checks is
// caught too, and so is the node marked unschedulable.
func (h *harness) watchResidents(ctx context.Context) {
	for ctx.Err() == nil {
		list, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).List(ctx, metav1.ListOptions{LabelSelector: "chaos-vm"})
		if err == nil {
			for _, vmi := range list.Items {
				b, ok := h.residents[vmi.Name]
				if !ok {
					continue
				}
				switch {
				case vmi.UID != b.vmi:
					h.violate(fmt.Sprintf("resident %s: VMI replaced (%s -> %s)", vmi.Name, b.vmi, vmi.UID))
				case vmi.Status.Phase != v1.Running:
					h.violate(fmt.Sprintf("resident %s: VMI phase %s at %v", vmi.Name, vmi.Status.Phase, h.since()))
				case conditionTrue(&vmi, v1.VirtualMachineInstancePaused):
					h.violate(fmt.Sprintf("resident %s: Paused=True at %v", vmi.Name, h.since()))
				}
			}
		}
		// The agent comes back well within the heartbeat threshold and
		// is never silent otherwise: the node is never marked, but while
		// a StoreFull fault holds its store full.
		if n, err := h.kube.CoreV1().Nodes().Get(ctx, h.node.Name, metav1.GetOptions{}); err == nil && !h.storeFull.Load() {
			if err := takesVMIs(n, true); err != nil {
				h.violate(fmt.Sprintf("at %v: %v", h.since(), err))
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (h *harness) since() time.Duration { return time.Since(h.start).Round(time.Second) }

func conditionTrue(vmi *v1.VirtualMachineInstance, typ v1.VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// vmiGone reports whether VMI name (of UID uid, any when empty) is gone.
func (h *harness) vmiGone(ctx context.Context, name string, uid types.UID) error {
	vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if uid != "" && vmi.UID != uid {
		return nil
	}
	return fmt.Errorf("VMI %s still there (phase %s, deleting %v, finalizers %v)", name, vmi.Status.Phase,
		vmi.DeletionTimestamp != nil, vmi.Finalizers)
}
