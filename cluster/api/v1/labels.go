package v1

// Labels, annotations and finalizers with KubeVirt's spellings, so existing
// tooling that selects on them keeps working.
const (
	// AppLabel marks nodevirt-created objects; launcher pods carry
	// AppLabel=virt-launcher.
	AppLabel = "kubevirt.io"
	// LauncherAppValue is the AppLabel value of launcher pods.
	LauncherAppValue = "virt-launcher"
	// CreatedByLabel on a launcher pod holds the UID of its VMI.
	CreatedByLabel = "kubevirt.io/created-by"
	// NodeNameLabel on a VMI names the node it runs on; node agents watch
	// their own VMIs through it.
	NodeNameLabel = "kubevirt.io/nodeName"
	// DomainAnnotation on a launcher pod holds the VMI name.
	DomainAnnotation = "kubevirt.io/domain"
	// SchedulableLabel on a node says the node agent is alive and accepts VMs.
	SchedulableLabel = "kubevirt.io/schedulable"
	// MigrationJobUIDLabel on a migration's target launcher pod holds the
	// VMIM's UID.
	MigrationJobUIDLabel = "kubevirt.io/migrationJobUID"
	// MigrationTargetNodeNameLabel on a VMI names the node its migration
	// target runs on, so that node's agent watches the VMI too.
	MigrationTargetNodeNameLabel = "kubevirt.io/migrationTargetNodeName"
	// VirtualMachinePoolRevisionName on a pool's VM (and in its VMI
	// template, so on its VMIs) names the revision of the pool's template
	// it was made from (cluster/pool).
	VirtualMachinePoolRevisionName = "kubevirt.io/vm-pool-revision-name"
	// CPUManagerLabel on a node is "true" when its kubelet runs the static
	// CPU manager policy (exclusive CPUs for Guaranteed pods); launcher pods
	// of VMIs with dedicatedCpuPlacement select it, as KubeVirt's do.
	CPUManagerLabel = "cpumanager"
	// KVMLabel on a node is "true" when its agent found KVM usable there
	// (nodevirt's own label: a /dev/kvm that cannot run ordinary guests,
	// e.g. one backed by kvm_pvm, is "false"). The controller's
	// useEmulation "auto" keeps emulated launcher pods off nodes labelled
	// "true" and sends a VMI to KVM when an eligible node has it.
	KVMLabel = "nodevirt.io/kvm"
	// HeartbeatAnnotation on a node holds the agent's last heartbeat (RFC 3339).
	HeartbeatAnnotation = "kubevirt.io/heartbeat"
	// PVCCapacitiesAnnotation on a launcher pod (nodevirt's own, written by
	// the controller when it renders the pod) maps each filesystem-mode PVC
	// volume's name to its claim's capacity in bytes, as JSON
	// ({"data":10737418240}): the agent sizes a disk.img the launcher
	// creates from it. Block mode is what the pod's volumeDevices say.
	PVCCapacitiesAnnotation = "nodevirt.io/pvc-capacities"

	// VirtualMachineInstanceFinalizer holds a VMI until the node agent has
	// shut its guest down and released its resources.
	VirtualMachineInstanceFinalizer = "kubevirt.io/foregroundDeleteVirtualMachine"
	// VirtualMachineControllerFinalizer holds a VM until its VMI is gone.
	VirtualMachineControllerFinalizer = "kubevirt.io/virtualMachineControllerFinalize"
	// MigrationFinalizer holds a migration until both agents are done with it.
	MigrationFinalizer = "kubevirt.io/migrationJobFinalize"
)

// Unlabelled reports whether the VMI carries neither the node label nor a
// migration target's: the controller has not scheduled it to a node yet
// (an agent may have taken it over; status.nodeName then names the node).
func (vmi *VirtualMachineInstance) Unlabelled() bool {
	return vmi.Labels[NodeNameLabel] == "" && vmi.Labels[MigrationTargetNodeNameLabel] == ""
}
