package v1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
)

// StatusApplyUpgrade returns the JSON patch that hands the status fields
// manager wrote with Update requests (merge patches and UpdateStatus, as
// every writer did before status was written by server-side apply) to
// manager's Apply entry, or nil when there is nothing to hand over.
//
// Without it a field written before an upgrade stays co-owned by the old
// Update entry, and the writer's apply that omits it (Paused after an
// unpause) no longer removes it. The patch replaces metadata.managedFields
// and pins vmi's resourceVersion; send it to the VMI itself (not the status
// subresource), then apply with the resourceVersion it returns.
func StatusApplyUpgrade(vmi *VirtualMachineInstance, manager string) ([]byte, error) {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(vmi, sets.New(manager), manager, csaupgrade.Subresource("status"))
	if err != nil {
		return nil, fmt.Errorf("upgrade managed fields of vmi %s/%s for %s: %w", vmi.Namespace, vmi.Name, manager, err)
	}
	return patch, nil
}
