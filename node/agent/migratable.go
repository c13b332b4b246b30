package agent

import (
	"fmt"
	"strings"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/store"
)

// notMigratable says why the VMI cannot be live-migrated (reason and
// message of LiveMigratable=False, KubeVirt's spellings), "" when it can.
//
//   - A bridge binding on the pod network: the guest holds the pod's own
//     address, which the target pod does not have.
//   - Disks whose content lives on this node and is written: containerDisk
//     overlays and emptyDisks (files in the pod), and PVCs — nodevirt does
//     not migrate storage yet, and does not look up whether a claim is
//     shared (ReadWriteMany), so every PVC counts as node-local.
//
// Kernel boot and cloud-init volumes are migratable: the target pod has
// the same kernel image and regenerates the same read-only ISO.
func notMigratable(vmi *v1.VirtualMachineInstance, rec *store.Record) (reason, message string) {
	if rec != nil {
		for _, i := range rec.Interfaces {
			if i.Binding == bindingBridge {
				return v1.ReasonInterfaceNotLiveMigratable,
					fmt.Sprintf("cannot migrate VMI which does not use masquerade to connect to the pod network (interface %q)", i.Name)
			}
		}
	}
	if vmi == nil {
		return "", ""
	}
	var local []string
	for _, v := range vmi.Spec.Volumes {
		switch {
		case v.ContainerDisk != nil:
			local = append(local, fmt.Sprintf("containerDisk %q", v.Name))
		case v.EmptyDisk != nil:
			local = append(local, fmt.Sprintf("emptyDisk %q", v.Name))
		case v.PersistentVolumeClaim != nil:
			local = append(local, fmt.Sprintf("persistentVolumeClaim %q", v.Name))
		}
	}
	if len(local) > 0 {
		return v1.ReasonDisksNotLiveMigratable,
			"cannot migrate VMI with node-local writable disks (storage migration is not supported): " + strings.Join(local, ", ")
	}
	return "", ""
}
