package chaos

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Step deadlines: from the request until it took effect, faults included:
// a kube-apiserver outage (30 s and up to 40 s of restart) right after a
// run of agent kills (each ~8 s of the kubelet's respawn) — the first full
// run saw a pause miss 2 minutes that way.
const (
	createDeadline = 4 * time.Minute
	stepDeadline   = 4 * time.Minute
)

// churn is the workload: VM after VM is created, paused, unpaused,
// stopped and started through its run strategy, and deleted, until ctx
// ends. A step that misses its deadline is a violation; the VM is deleted
// anyway and the next one starts.
func (h *harness) churn(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("churn-%d", i)
		var uid types.UID
		steps := []struct {
			kind     string
			deadline time.Duration
			do       func(context.Context) error
			done     func(context.Context) error
		}{
			{"create", createDeadline, func(context.Context) error { return h.create(name) },
				func(ctx context.Context) error { return h.running(ctx, name, "", &uid) }},
			{"pause", stepDeadline, func(ctx context.Context) error { return h.subresource(ctx, name, "pause") },
				func(ctx context.Context) error { return h.paused(ctx, name, true) }},
			{"unpause", stepDeadline, func(ctx context.Context) error { return h.subresource(ctx, name, "unpause") },
				func(ctx context.Context) error { return h.paused(ctx, name, false) }},
			{"stop", stepDeadline, func(ctx context.Context) error { return h.runStrategy(ctx, name, v1.RunStrategyHalted) },
				func(ctx context.Context) error { return h.vmiGone(ctx, name, "") }},
			{"start", createDeadline, func(ctx context.Context) error { return h.runStrategy(ctx, name, v1.RunStrategyAlways) },
				func(ctx context.Context) error { return h.running(ctx, name, "", &uid) }},
		}
		for _, s := range steps {
			if !h.step(ctx, s.kind, name, s.deadline, s.do, s.done) {
				break
			}
		}
		// Delete whatever happened before, with its own deadline, even
		// after the run ended (nothing is left behind).
		h.step(context.WithoutCancel(ctx), "delete", name, stepDeadline,
			func(ctx context.Context) error { return h.deleteVM(ctx, name) },
			func(ctx context.Context) error { return h.vmGone(ctx, name) })
	}
}

// step retries do until it succeeds, then waits for done, both within
// deadline, and records the step. It reports whether the step finished;
// a step cut short by the end of the run is not recorded.
func (h *harness) step(ctx context.Context, kind, vm string, deadline time.Duration, do, done func(context.Context) error) bool {
	began := time.Now()
	err := await(ctx, deadline, func() error { return do(ctx) })
	if err == nil {
		err = await(ctx, time.Until(began.Add(deadline)), func() error { return done(ctx) })
	}
	if ctx.Err() != nil {
		return false
	}
	s := Step{At: began.Sub(h.start), Kind: kind, VM: vm, Took: time.Since(began)}
	if err != nil {
		s.Err = fmt.Sprintf("not done within %v: %v", deadline, err)
		if kind == "create" || kind == "start" {
			s.Err += " — " + h.whyNotRunning(context.WithoutCancel(ctx), vm)
		}
		h.violate(fmt.Sprintf("workload %s: %s %s", vm, kind, s.Err))
	}
	h.mu.Lock()
	h.report.Steps = append(h.report.Steps, s)
	h.mu.Unlock()
	return err == nil
}

func (h *harness) create(name string) error {
	_, err := h.cluster.KubectlText(30*time.Second, h.vmManifest(name, "churn", h.node.Name), "apply", "-f", "-")
	return err
}

// running: VM name's VMI runs with a launcher pod; uid gets its UID.
func (h *harness) running(ctx context.Context, name string, old types.UID, uid *types.UID) error {
	vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if vmi.UID == old || vmi.Status.Phase != v1.Running {
		return fmt.Errorf("VMI %s phase %q", name, vmi.Status.Phase)
	}
	if _, err := h.launcherPod(ctx, vmi); err != nil {
		return err
	}
	*uid = vmi.UID
	return nil
}

// subresource calls a subresources.kubevirt.io action on VMI name, as
// virtctl does.
func (h *harness) subresource(ctx context.Context, name, action string) error {
	return h.kube.CoreV1().RESTClient().Put().
		AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", namespace, "virtualmachineinstances", name, action).
		SetHeader("Content-Type", "application/json").Body([]byte("{}")).Do(ctx).Error()
}

func (h *harness) paused(ctx context.Context, name string, want bool) error {
	vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := conditionTrue(vmi, v1.VirtualMachineInstancePaused); got != want {
		return fmt.Errorf("VMI %s Paused=%v (phase %s)", name, got, vmi.Status.Phase)
	}
	return nil
}

func (h *harness) runStrategy(ctx context.Context, name string, s v1.VirtualMachineRunStrategy) error {
	patch := fmt.Appendf(nil, `{"spec":{"runStrategy":%q}}`, s)
	_, err := h.virt.KubevirtV1().VirtualMachines(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (h *harness) deleteVM(ctx context.Context, name string) error {
	err := h.virt.KubevirtV1().VirtualMachines(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// vmGone: VM name and its VMI are gone.
func (h *harness) vmGone(ctx context.Context, name string) error {
	vm, err := h.virt.KubevirtV1().VirtualMachines(namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return fmt.Errorf("VM %s still there (finalizers %v)", name, vm.Finalizers)
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	return h.vmiGone(ctx, name, "")
}
