package snapshot

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
)

// A VM's status.snapshotInProgress and status.restoreInProgress name the
// one snapshot or restore working on it: a lock the VM controller honours
// (a stopped VM does not start) and a second snapshot or restore waits
// for. Each is written alone, by a merge patch carrying the VM's
// resourceVersion: two takers racing for it cannot both win.
const (
	fieldSnapshot = "snapshotInProgress"
	fieldRestore  = "restoreInProgress"
)

// holder returns who holds field of vm's status ("" when nobody).
func holder(vm *v1.VirtualMachine, field string) string {
	p := vm.Status.SnapshotInProgress
	if field == fieldRestore {
		p = vm.Status.RestoreInProgress
	}
	if p == nil {
		return ""
	}
	return *p
}

// setHolder writes field of vm's status: name, or nil for "".
func setHolder(ctx context.Context, api kvclient.VirtualMachinesGetter, vm *v1.VirtualMachine, field, name string) error {
	var value any
	if name != "" {
		value = name
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": vm.ResourceVersion, "uid": vm.UID},
		"status":   map[string]any{field: value},
	})
	if err != nil {
		return err
	}
	if _, err := api.VirtualMachines(vm.Namespace).Patch(ctx, vm.Name, types.MergePatchType, patch, patchOptions, "status"); err != nil {
		return fmt.Errorf("vm %s/%s status.%s: %w", vm.Namespace, vm.Name, field, err)
	}
	return nil
}

var patchOptions = metav1.PatchOptions{FieldManager: v1.ManagerController}

// releaseHolder clears field of VM namespace/name's status if name holds
// it. The VM is read from the API, not the cache: a release right after
// this controller took the VM or wrote it must see that.
func releaseHolder(ctx context.Context, api kvclient.VirtualMachinesGetter, namespace, vmName, field, name string) error {
	vm, err := api.VirtualMachines(namespace).Get(ctx, vmName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get vm %s/%s: %w", namespace, vmName, err)
	}
	if holder(vm, field) != name {
		return nil
	}
	err = setHolder(ctx, api, vm, field, "")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
