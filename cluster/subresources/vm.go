package subresources

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// vmHandler decides a lifecycle request from the VM and its VMI (nil when
// absent) and the request body it decoded.
type vmLifecycle func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) (plan, error)

func (h *Handler) vmStart(w http.ResponseWriter, r *http.Request) {
	var opts StartOptions
	h.lifecycle(w, r, &opts, func() []string { return opts.DryRun }, func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) (plan, error) {
		return planStart(vm, vmi, opts)
	})
}

func (h *Handler) vmStop(w http.ResponseWriter, r *http.Request) {
	var opts StopOptions
	h.lifecycle(w, r, &opts, func() []string { return opts.DryRun }, func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) (plan, error) {
		return planStop(vm, vmi, opts)
	})
}

func (h *Handler) vmRestart(w http.ResponseWriter, r *http.Request) {
	var opts RestartOptions
	h.lifecycle(w, r, &opts, func() []string { return opts.DryRun }, func(vm *v1.VirtualMachine, vmi *v1.VirtualMachineInstance) (plan, error) {
		return planRestart(vm, vmi, opts)
	})
}

// lifecycle decodes the body into opts, reads the VM and its VMI, plans
// and applies. Success is 202 Accepted, as virt-api answers.
func (h *Handler) lifecycle(w http.ResponseWriter, r *http.Request, opts any, dryRun func() []string, decide vmLifecycle) {
	ctx := r.Context()
	ns, name := r.PathValue("ns"), r.PathValue("name")
	if err := decodeBody(r, opts); err != nil {
		writeStatus(w, err)
		return
	}
	if ro, ok := opts.(*RestartOptions); ok {
		if err := validateRestart(*ro); err != nil {
			writeStatus(w, err)
			return
		}
	}
	vm, err := h.getVM(ctx, ns, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	vmi, _, err := h.findVMI(ctx, ns, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	p, err := decide(vm, vmi)
	if err == nil {
		err = h.apply(ctx, ns, name, vmi, p, dryRun())
	}
	if err != nil {
		writeStatus(w, err)
		return
	}
	h.log.Info("VM lifecycle request", "vm", ns+"/"+name, "path", r.URL.Path, "patches", len(p.Patches), "dryRun", isDryRun(dryRun()))
	w.WriteHeader(http.StatusAccepted)
}

// apply runs p's patches in order, then deletes the launcher pod of a
// forced restart.
func (h *Handler) apply(ctx context.Context, ns, name string, vmi *v1.VirtualMachineInstance, p plan, dryRun []string) error {
	kv := h.deps.KubeVirt.KubevirtV1()
	for _, pt := range p.Patches {
		body, err := json.Marshal(pt.Ops)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("encode %s patch: %w", pt.Target, err))
		}
		po := metav1.PatchOptions{DryRun: dryRun, FieldManager: v1.ManagerAPI}
		switch pt.Target {
		case targetVM:
			_, err = kv.VirtualMachines(ns).Patch(ctx, name, types.JSONPatchType, body, po)
		case targetVMStatus:
			_, err = kv.VirtualMachines(ns).Patch(ctx, name, types.JSONPatchType, body, po, "status")
		case targetVMI:
			_, err = kv.VirtualMachineInstances(ns).Patch(ctx, name, types.JSONPatchType, body, po)
		}
		if err != nil {
			return patchError(pt.Target, name, err)
		}
	}
	if p.DeleteLauncher && !isDryRun(dryRun) && vmi != nil {
		return h.deleteLauncher(ctx, ns, vmi)
	}
	return nil
}

// patchError maps a failed patch: a JSON patch whose test failed (the
// object changed since it was read; the API server answers 422) is a 409
// Conflict, anything else a 500.
func patchError(t target, name string, err error) error {
	if apierrors.IsInvalid(err) {
		gr := grVM
		if t == targetVMI {
			gr = grVMI
		}
		return apierrors.NewConflict(gr, name, err)
	}
	return apierrors.NewInternalError(fmt.Errorf("patch %s %s: %w", t, name, err))
}

// deleteLauncher deletes the running launcher pod of vmi with a 1 s grace
// period (a forced restart; virt-api does the same).
func (h *Handler) deleteLauncher(ctx context.Context, ns string, vmi *v1.VirtualMachineInstance) error {
	pods, err := h.deps.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: v1.AppLabel + "=" + v1.LauncherAppValue + "," + v1.CreatedByLabel + "=" + string(vmi.UID),
		FieldSelector: "status.phase=Running",
	})
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("list launcher pods of VMI %s/%s: %w", ns, vmi.Name, err))
	}
	if len(pods.Items) == 0 {
		return nil
	}
	pod := pods.Items[0].Name
	grace := int64(1)
	err = h.deps.Kube.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	if err != nil && !apierrors.IsNotFound(err) {
		return apierrors.NewInternalError(fmt.Errorf("delete launcher pod %s/%s: %w", ns, pod, err))
	}
	return nil
}

func (h *Handler) vmMigrate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("ns"), r.PathValue("name")
	var opts MigrateOptions
	if err := decodeBody(r, &opts); err != nil {
		writeStatus(w, err)
		return
	}
	vm, err := h.getVM(ctx, ns, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	vmi, _, err := h.findVMI(ctx, ns, name)
	if err == nil {
		err = planMigrate(vm, vmi)
	}
	if err != nil {
		writeStatus(w, err)
		return
	}
	vmim := &v1.VirtualMachineInstanceMigration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "kubevirt-migrate-vm-", Namespace: ns},
		Spec:       v1.VirtualMachineInstanceMigrationSpec{VMIName: name, AddedNodeSelector: opts.AddedNodeSelector},
	}
	created, err := h.deps.KubeVirt.KubevirtV1().VirtualMachineInstanceMigrations(ns).Create(ctx, vmim,
		metav1.CreateOptions{DryRun: opts.DryRun, FieldManager: v1.ManagerAPI})
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("create migration of VMI %s/%s: %w", ns, name, err)))
		return
	}
	h.log.Info("VM migration requested", "vm", ns+"/"+name, "migration", created.Name, "dryRun", isDryRun(opts.DryRun))
	w.WriteHeader(http.StatusAccepted)
}

// vmExpandSpec answers the VM as stored: nodevirt has no instancetypes or
// preferences to expand.
func (h *Handler) vmExpandSpec(w http.ResponseWriter, r *http.Request) {
	vm, err := h.getVM(r.Context(), r.PathValue("ns"), r.PathValue("name"))
	if err != nil {
		writeStatus(w, err)
		return
	}
	writeVM(w, vm)
}

// expandVMSpec answers the VM of the body, in the request's namespace.
func (h *Handler) expandVMSpec(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	b, err := readBody(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	vm := &v1.VirtualMachine{}
	if err := json.Unmarshal(b, vm); err != nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %v", err)))
		return
	}
	if vm.Kind != "" && vm.Kind != v1.KindVM {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("kind: want %s, got %q", v1.KindVM, vm.Kind)))
		return
	}
	if vm.Namespace != "" && vm.Namespace != ns {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("VM namespace must be empty or %s", ns)))
		return
	}
	vm.Namespace = ns
	writeVM(w, vm)
}

func writeVM(w http.ResponseWriter, vm *v1.VirtualMachine) {
	vm = vm.DeepCopy()
	vm.APIVersion, vm.Kind = v1.SchemeGroupVersion.String(), v1.KindVM
	writeJSON(w, http.StatusOK, vm)
}

// getVM reads the VM from the API server (never a cache: the lifecycle
// plan must see the current run strategy and requests).
func (h *Handler) getVM(ctx context.Context, ns, name string) (*v1.VirtualMachine, error) {
	vm, err := h.deps.KubeVirt.KubevirtV1().VirtualMachines(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, apierrors.NewNotFound(grVM, name)
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("unable to retrieve vm [%s]: %w", name, err))
	}
	return vm, nil
}

// findVMI reads the VMI; found is false when there is none (the lifecycle
// plans treat "no VMI" as a state, not an error).
func (h *Handler) findVMI(ctx context.Context, ns, name string) (vmi *v1.VirtualMachineInstance, found bool, err error) {
	vmi, err = h.getVMI(ctx, ns, name)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	return vmi, err == nil, err
}

// getVMI reads the VMI from the API server; absent is a 404.
func (h *Handler) getVMI(ctx context.Context, ns, name string) (*v1.VirtualMachineInstance, error) {
	vmi, err := h.deps.KubeVirt.KubevirtV1().VirtualMachineInstances(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, apierrors.NewNotFound(grVMI, name)
	case err != nil:
		return nil, apierrors.NewInternalError(fmt.Errorf("unable to retrieve vmi [%s]: %w", name, err))
	}
	return vmi, nil
}

// vmPortForward resolves the VM's VMI (it must exist and be owned by the
// VM) and forwards like the VMI route.
func (h *Handler) vmPortForward(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("ns"), r.PathValue("name")
	vm, err := h.getVM(ctx, ns, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if !vm.Status.Created {
		writeStatus(w, conflictVM(name, "VMI is not started"))
		return
	}
	vmi, err := h.getVMI(ctx, ns, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	if !ownedBy(vmi, vm) {
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("unable to retrieve vmi [%s] for vm: not owned by it", name)))
		return
	}
	h.forward(w, r, vmi, portForwardAction)
}

func ownedBy(vmi *v1.VirtualMachineInstance, vm *v1.VirtualMachine) bool {
	for _, ref := range vmi.OwnerReferences {
		if ref.UID == vm.UID {
			return true
		}
	}
	return false
}
