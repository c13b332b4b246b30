package agent

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/status"
	"github.com/nodevirt/nodevirt/store"
)

// domainState summarises the observation as a status.Domain. It is pure.
func domainState(o *Observation) (status.Domain, string) {
	if o.handoffRefused() {
		return status.DomainLost, fmt.Sprintf("live migration %s completed, but its target on %s ended before it reported the guest running: the guest's state was on the target",
			o.Record.Migration.UID, targetOf(o))
	}
	if e := o.Launcher.Exit; e != nil {
		if e.GuestShutdown {
			return status.DomainShutdown, ""
		}
		return status.DomainCrashed, exitReason(e)
	}
	if o.Runtime.QMPConnected {
		switch o.Runtime.RunState {
		case "paused", "prelaunch": // prelaunch: started with -S (startStrategy Paused)
			if o.Record != nil && o.Record.Migration != nil && o.Record.Migration.StoppedGuest {
				// Stopped by the source for a Paused transfer: not the
				// user's pause (migrationState.mode says Paused).
				return status.DomainRunning, ""
			}
			return status.DomainPaused, ""
		case "running", "inmigrate", "postmigrate", "finish-migrate", "suspended":
			return status.DomainRunning, ""
		}
		return status.DomainUnknown, ""
	}
	ran := o.Record != nil && o.Record.Process.PID != 0
	switch {
	case o.Pod == nil && o.VMI != nil && o.VMI.Status.Phase == v1.Running:
		return status.DomainLost, "the launcher pod is gone"
	case ran && !o.Runtime.QEMUAlive && o.Launcher.State == LauncherUnreachable:
		return status.DomainLost, "QEMU and its launcher are gone"
	}
	return status.DomainUnknown, ""
}

// targetOf names the node of the VMI's last migration target.
func targetOf(o *Observation) string {
	if ms := o.VMI.Status.MigrationState; ms != nil && ms.TargetNode != "" {
		return ms.TargetNode
	}
	return "another node"
}

func exitReason(e *launcher.Exit) string {
	if e.Error != "" {
		return "the launch failed: " + e.Error
	}
	if e.Reason != "" && e.Signal == "" && e.Code != 0 {
		return fmt.Sprintf("QEMU exited with code %d after %s", e.Code, e.Reason)
	}
	if e.Signal != "" {
		return fmt.Sprintf("QEMU was terminated by a signal (%s)", e.Signal)
	}
	return fmt.Sprintf("QEMU exited with code %d", e.Code)
}

// facts turns an observation into status.Facts. ok is false when the
// observation is not good enough to report anything: then the status is
// left alone rather than guessed (an agent that has not re-attached yet
// must not flap Ready).
func facts(o *Observation) (status.Facts, bool) {
	d, reason := domainState(o)
	f := status.Facts{
		Domain:         d,
		Reason:         reason,
		PodMissing:     o.Pod == nil,
		PodTerminating: o.Pod != nil && o.Pod.DeletionTimestamp != nil,
		AgentConnected: o.Runtime.AgentConnected,
		Now:            o.Now,
	}
	if o.VMI != nil && o.VMI.Spec.ReadinessProbe != nil && o.VMI.Spec.ReadinessProbe.GuestAgentPing != nil {
		f.ReadyNeedsAgent = true
	}
	if !o.Runtime.AgentProbed && o.VMI != nil {
		// Not probed since (re-)attach: keep what the status says.
		f.AgentConnected = conditionTrue(o.VMI, v1.VirtualMachineInstanceAgentConnected)
	}
	if d == status.DomainUnknown && !f.PodMissing && !f.PodTerminating {
		return f, false
	}
	if o.Record != nil {
		f.Interfaces = statusInterfaces(o.Record.Interfaces)
		if o.VMI == nil || o.VMI.Status.Accelerator == "" {
			// Once in the status it stays (Derive keeps it): the launch
			// spec is decoded only until then, not on every sync.
			f.Accelerator = recordAccelerator(o.Record.Spec)
		}
	}
	f.NotMigratableReason, f.NotMigratableMessage = notMigratable(o.VMI, o.Record)
	return f, true
}

// statusInterfaces reports the allocated interfaces as status.interfaces.
func statusInterfaces(ifs []store.Interface) []v1.VirtualMachineInstanceNetworkInterface {
	if len(ifs) == 0 {
		return nil
	}
	out := make([]v1.VirtualMachineInstanceNetworkInterface, 0, len(ifs))
	for k, i := range ifs {
		s := v1.VirtualMachineInstanceNetworkInterface{
			Name: i.Name,
			MAC:  i.MAC,
			// The guest names virtio NICs in PCI order, which is spec
			// order here; the guest agent's view is not merged in yet.
			InterfaceName: fmt.Sprintf("eth%d", k),
			InfoSource:    "domain",
		}
		ips := i.PodIPs
		if i.Binding == bindingBridge {
			ips = i.IPs
		}
		for _, p := range ips {
			s.IPAddresses = append(s.IPAddresses, p.Addr().String())
		}
		if len(s.IPAddresses) > 0 {
			s.IPAddress = s.IPAddresses[0]
		}
		out = append(out, s)
	}
	return out
}

func conditionTrue(vmi *v1.VirtualMachineInstance, t v1.VirtualMachineInstanceConditionType) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// recordAccelerator is the accelerator of the launch spec a record holds
// (status.accelerator), "" when there is no readable spec yet.
func recordAccelerator(raw json.RawMessage) v1.Accelerator {
	if len(raw) == 0 {
		return ""
	}
	var spec launchspec.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return ""
	}
	switch spec.Accelerator() {
	case "kvm":
		return v1.AcceleratorKVM
	case "tcg":
		return v1.AcceleratorTCG
	}
	return ""
}
