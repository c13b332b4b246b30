package agent

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Prelaunch: the agent starts a VMI's QEMU as soon as the VMI's launcher
// pod is on this node and its launcher answers, without waiting for the
// controller's Scheduled. Scheduled follows the kubelet's report that the
// pod runs, which comes up to a PLEG relist (1 s) after the container
// started, and more under a burst; the network, the launch and the QMP
// attach fit in that wait. The agent writes nothing of the VMI's status
// while QEMU starts.
//
// Takeover: once QEMU is attached and the domain runs (or is paused), the
// agent takes the VMI over in one status write, straight from Scheduling
// to Running: with the phase it writes what the controller would have
// written at Scheduled, the node, the launcher pod as the active pod and
// the Scheduled timestamp (takeoverStatus; the ownership table's takeover
// rows). The write carries the resourceVersion read: if the controller
// wrote Scheduled (or its label) first, it conflicts, and the next sync
// finds the VMI scheduled and reports Running the usual way. The
// controller then labels the VMI for the node and puts its finalizer on,
// as it does for a VMI it scheduled itself. Until that label, a taken-over
// VMI is recognised by its status.nodeName (takenOver) and read from the
// API server, as while it was prelaunching.
//
// The agent's VMI informers see only VMIs labelled for this node, which a
// VMI is from the controller's label on; a prelaunched VMI is read from
// the API server (liveVMI), and only once its launcher answers on its
// socket, so a pod waiting for its sandbox costs no request. Everything
// built is the record's, as for any VMI: a VMI deleted before it was taken
// over has its pod deleted by the controller and is gone from the API, and
// the agent's orphan path quits its QEMU and releases the rest.

// prelaunchPod reports whether pod is a launcher pod the agent may start
// a VMI in before Scheduled: on this node, not a migration target's, not
// being deleted and not finished. It is pure.
func prelaunchPod(pod *corev1.Pod, node string) bool {
	return pod != nil && pod.Spec.NodeName == node && pod.DeletionTimestamp == nil &&
		pod.Labels[v1.MigrationJobUIDLabel] == "" &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// takenOver reports whether vmi is one this node's agent took over
// before the controller labelled it: unlabelled, status.nodeName this
// node, and a phase the agent writes.
func takenOver(vmi *v1.VirtualMachineInstance, node string) bool {
	return vmi.Unlabelled() && vmi.Status.NodeName == node && vmi.Status.Phase.OwnedByAgent()
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
	return vmi != nil && vmi.Unlabelled() && vmi.Status.Phase == v1.Scheduling && !o.deleting() &&
		(vmi.Status.NodeName == "" || vmi.Status.NodeName == o.Node) &&
		prelaunchPod(o.Pod, o.Node)
}

// planPrelaunch starts the VMI as planRun does, without a refusal (a full
// store refuses it once it is Scheduled); the status is reported only
// once the domain runs, by the takeover (report).
func planPrelaunch(o *Observation) Plan {
	if !o.liveRecord() && o.Refusing != "" {
		return Plan{}
	}
	return planRun(o)
}

// takeoverStatus is cur as the controller would have scheduled it on
// node in pod at now: phase Scheduled, the node, the pod as the active
// pod, the Scheduled timestamp. Derived from it, a running domain's status
// is Running. It is pure.
func takeoverStatus(cur v1.VirtualMachineInstanceStatus, pod *corev1.Pod, node string, now time.Time) v1.VirtualMachineInstanceStatus {
	s := *cur.DeepCopy()
	s.Phase = v1.Scheduled
	s.NodeName = node
	s.ActivePods = map[string]string{string(pod.UID): node}
	for _, t := range s.PhaseTransitionTimestamps {
		if t.Phase == v1.Scheduled {
			return s
		}
	}
	s.PhaseTransitionTimestamps = append(s.PhaseTransitionTimestamps, v1.VirtualMachineInstancePhaseTransitionTimestamp{
		Phase: v1.Scheduled, PhaseTransitionTimestamp: metav1.NewTime(now.Truncate(time.Second)),
	})
	return s
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
