package status

import (
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Domain is the agent's summary of the VM's state on the node.
type Domain string

// Domain states.
const (
	// DomainUnknown: nothing is known yet (not launched, or not yet
	// re-attached); the phase stays as it is.
	DomainUnknown Domain = ""
	// DomainRunning: QEMU runs the guest.
	DomainRunning Domain = "Running"
	// DomainPaused: QEMU runs, the guest's vCPUs are stopped.
	DomainPaused Domain = "Paused"
	// DomainShutdown: QEMU exited after the guest shut down.
	DomainShutdown Domain = "Shutdown"
	// DomainCrashed: QEMU exited for another reason (crash, kill).
	DomainCrashed Domain = "Crashed"
	// DomainLost: the launcher or its pod is gone with the guest.
	DomainLost Domain = "Lost"
)

// Facts is what the agent observed about one VMI, the input of Derive.
type Facts struct {
	Domain Domain
	// Reason explains a Crashed or Lost domain, e.g. "QEMU killed by SIGKILL".
	Reason string

	// PodTerminating: the launcher pod has a deletion timestamp.
	PodTerminating bool
	// PodMissing: no launcher pod is known for the VMI.
	PodMissing bool

	// AgentConnected: the guest agent answers.
	AgentConnected bool
	// ReadyNeedsAgent: the VMI's readiness probe is guestAgentPing, so it
	// is Ready only while the guest agent answers.
	ReadyNeedsAgent bool
	// GuestOSInfo replaces status.guestOSInfo when not zero.
	GuestOSInfo v1.VirtualMachineInstanceGuestOSInfo

	// Accelerator replaces status.accelerator when set: what QEMU was
	// launched with (KVM or TCG).
	Accelerator v1.Accelerator

	// Interfaces replaces status.interfaces when not nil.
	Interfaces []v1.VirtualMachineInstanceNetworkInterface

	// NotMigratableReason, when set, makes LiveMigratable False with this
	// reason (e.g. InterfaceNotLiveMigratable) and NotMigratableMessage.
	NotMigratableReason  string
	NotMigratableMessage string

	Now time.Time
}

// Event is a Kubernetes event the caller records on the VMI.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Event reasons, KubeVirt's spellings.
const (
	ReasonStarted      = "Started"
	ReasonStopped      = "Stopped"
	ReasonShuttingDown = "ShuttingDown"
	ReasonDeleted      = "Deleted"
	// ReasonGuestAgentNotConnected: Ready=False because the guestAgentPing
	// readiness probe fails.
	ReasonGuestAgentNotConnected = "GuestAgentNotConnected"
)
