package agent

import (
	"fmt"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/store"
)

// notMigratable says why the VMI cannot be live-migrated (reason and
// message of LiveMigratable=False, KubeVirt's spellings), "" when it can.
//
//   - A bridge binding on the pod network: the guest holds the pod's own
//     address, which the target pod does not have.
//   - A PVC whose claim is not shared: ReadWriteMany, as the controller
//     recorded it in status.volumeStatus when it made the launcher pod
//     (a claim it did not record counts as node-local). Shared claims
//     stay where they are: the target pod mounts the same volume, and
//     QEMU hands the disk over at the switch-over (cache none, see
//     package convert).
//
// Node-local disks in the pod (containerDisk overlays, emptyDisks) move
// with the guest (migrationdisks.go); kernel boot and cloud-init volumes
// need not: the target pod has the same kernel image and regenerates the
// same read-only ISO.
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
	shared := map[string]bool{}
	for _, s := range vmi.Status.VolumeStatus {
		shared[s.Name] = s.PersistentVolumeClaimInfo.Shared()
	}
	for _, v := range vmi.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && !shared[v.Name] {
			return v1.ReasonDisksNotLiveMigratable,
				fmt.Sprintf("cannot migrate VMI: PVC %s is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)", v.PersistentVolumeClaim.ClaimName)
		}
	}
	return "", ""
}
