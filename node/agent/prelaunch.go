package agent

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Prelaunch: the agent starts a VMI's QEMU as soon as the VMI's launcher
// pod is on this node and its launcher answers, without waiting for the
// controller's Scheduled. Scheduled follows the kubelet's report that the
// pod runs, which comes up to a PLEG relist (1 s) after the container
// started, and more under a burst; the network, the launch and the QMP
// attach fit in that wait. Nothing changes hands early: the phase stays
// the controller's until Scheduled and the agent writes nothing of the
// VMI's status before it (Plan.PatchStatus is off). Once the controller
// labels the VMI Scheduled, the next sync finds QEMU attached and reports
// Running.
//
// The agent's VMI informers see only VMIs labelled for this node, which a
// VMI is from Scheduled on; a prelaunched VMI is read from the API server
// (liveVMI), and only once its launcher answers on its socket, so a pod
// waiting for its sandbox costs no request. Everything built is the
// record's, as for any VMI: a VMI deleted before Scheduled has its pod
// deleted by the controller and is gone from the API, and the agent's
// orphan path quits its QEMU and releases the rest.

// prelaunchPod reports whether pod is a launcher pod the agent may start
// a VMI in before Scheduled: on this node, not a migration target's, not
// being deleted and not finished. It is pure.
func prelaunchPod(pod *corev1.Pod, node string) bool {
	return pod != nil && pod.Spec.NodeName == node && pod.DeletionTimestamp == nil &&
		pod.Labels[v1.MigrationJobUIDLabel] == "" &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// unlabelled reports whether vmi is labelled for no node and no incoming
// migration: the controller has not scheduled it yet.
func unlabelled(vmi *v1.VirtualMachineInstance) bool {
	return vmi.Labels[v1.NodeNameLabel] == "" && vmi.Labels[v1.MigrationTargetNodeNameLabel] == ""
}

// awaitingLauncher reports whether o is a launcher pod of a VMI the agent
// has not read yet, whose launcher does not answer: the pod's sockets
// directory (or the poll, until the kubelet made it) tells when it does.
func awaitingLauncher(o *Observation) bool {
	return o.VMI == nil && o.Record == nil && prelaunchPod(o.Pod, o.Node)
}

// prelaunching reports whether o is a VMI the controller has not
// scheduled yet whose launcher pod is on this node. It is pure.
func prelaunching(o *Observation) bool {
	vmi := o.VMI
	return vmi != nil && unlabelled(vmi) && vmi.Status.Phase == v1.Scheduling && !o.deleting() &&
		(vmi.Status.NodeName == "" || vmi.Status.NodeName == o.Node) &&
		prelaunchPod(o.Pod, o.Node)
}

// planPrelaunch starts the VMI as planRun does, without a word to the API
// server: no status, no refusal (a full store refuses it once it is
// Scheduled).
func planPrelaunch(o *Observation) Plan {
	if !o.liveRecord() && o.Refusing != "" {
		return Plan{}
	}
	p := planRun(o)
	p.PatchStatus = false
	return p
}

// vmiRef is the namespace and name of the VMI that owns a launcher pod,
// from the pod's controller reference; ok is false for a pod without one.
func vmiRef(pod *corev1.Pod, uid string) (ns, name string, ok bool) {
	ref := metav1.GetControllerOfNoCopy(pod)
	if ref == nil || ref.Kind != "VirtualMachineInstance" || string(ref.UID) != uid {
		return "", "", false
	}
	return pod.Namespace, ref.Name, true
}
