package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/e2e/localcluster"
)

// whyNotRunning says what a VMI that is not Running waits for: its
// launcher pods' phases, conditions and container states, and the latest
// events of the VMI and its pods, so that a stuck step in the report can
// be explained after the cluster is gone.
func (h *harness) whyNotRunning(ctx context.Context, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	vmi, err := h.virt.KubevirtV1().VirtualMachineInstances(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("VMI %s: %v", name, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "VMI %s phase %q", vmi.Name, vmi.Status.Phase)
	b.WriteString(h.describePods(ctx, vmi))
	return b.String()
}

// describePods describes vmi's launcher pods (the source and any
// migration target): phase, node, unmet conditions, waiting or ended
// containers, and the latest events of the VMI and of each pod.
func (h *harness) describePods(ctx context.Context, vmi *v1.VirtualMachineInstance) string {
	var b strings.Builder
	pods, err := h.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: v1.CreatedByLabel + "=" + string(vmi.UID)})
	if err != nil {
		return fmt.Sprintf("; pods: %v", err)
	}
	if len(pods.Items) == 0 {
		b.WriteString("; no launcher pod")
	}
	objects := []string{vmi.Name}
	for _, p := range pods.Items {
		objects = append(objects, p.Name)
		fmt.Fprintf(&b, "; pod %s %s node %q", p.Name, p.Status.Phase, p.Spec.NodeName)
		if p.DeletionTimestamp != nil {
			b.WriteString(" deleting")
		}
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, ", %s=%s %s %s", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		for _, c := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			switch {
			case c.State.Waiting != nil:
				fmt.Fprintf(&b, ", %s waiting %s %s", c.Name, c.State.Waiting.Reason, c.State.Waiting.Message)
			case c.State.Terminated != nil:
				fmt.Fprintf(&b, ", %s terminated %s (exit %d)", c.Name, c.State.Terminated.Reason, c.State.Terminated.ExitCode)
			}
		}
	}
	for _, name := range objects {
		evs, err := h.kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		if err != nil || len(evs.Items) == 0 {
			continue
		}
		slices.SortFunc(evs.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
		for _, e := range evs.Items[max(0, len(evs.Items)-3):] {
			fmt.Fprintf(&b, "; event %s %s %s: %s (×%d)", name, e.Type, e.Reason, e.Message, max(1, e.Count))
		}
	}
	return b.String()
}

// describeMigration says where a migration that did not end stands, so
// that it can be explained after the cluster is gone: its phase
// transitions (from the run's start), conditions, the VMI's
// migrationState, and the latest log lines naming it (its UID, its name
// or the VMI's UID) of the agents on its two nodes and of the controller,
// previous containers included (an agent SIGKILLed meanwhile).
func (h *harness) describeMigration(ctx context.Context, name string, vmi *v1.VirtualMachineInstance) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	vmim, err := h.virt.KubevirtV1().VirtualMachineInstanceMigrations(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("; migration %s: %v", name, err)
	}
	var b strings.Builder
	b.WriteString("; phases")
	for _, p := range vmim.Status.PhaseTransitionTimestamps {
		fmt.Fprintf(&b, " %s@%s", p.Phase, p.PhaseTransitionTimestamp.Sub(h.start).Round(time.Second))
	}
	for _, c := range vmim.Status.Conditions {
		fmt.Fprintf(&b, "; condition %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	nodes := []string{vmi.Status.NodeName}
	if ms := vmi.Status.MigrationState; ms != nil {
		at := func(t *metav1.Time) string {
			if t == nil {
				return "-"
			}
			return t.Sub(h.start).Round(time.Second).String()
		}
		fmt.Fprintf(&b, "; VMI migrationState: uid %s (this one: %t) target %s pod %s address %q ready %s started %s completed %t failed %t abortRequested %t; target label %q",
			ms.MigrationUID, ms.MigrationUID == vmim.UID, ms.TargetNode, ms.TargetPod, ms.TargetNodeAddress,
			at(ms.TargetNodeDomainReadyTimestamp), at(ms.StartTimestamp), ms.Completed, ms.Failed, ms.AbortRequested,
			vmi.Labels[v1.MigrationTargetNodeNameLabel])
		nodes = append(nodes, ms.TargetNode)
	}
	needles := []string{string(vmim.UID), vmim.Name, string(vmi.UID)}
	var pods []corev1.Pod
	for _, node := range slices.Compact(nodes) {
		if p, err := localcluster.FindAgentPod(ctx, h.kube, node); err == nil {
			pods = append(pods, p)
		}
	}
	if list, err := h.kube.CoreV1().Pods("nodevirt").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=nodevirt-controller"}); err == nil {
		pods = append(pods, list.Items...)
	}
	for _, p := range pods {
		for _, previous := range []bool{true, false} {
			lines := h.logLines(ctx, p, previous, needles, 15)
			if len(lines) == 0 {
				continue
			}
			fmt.Fprintf(&b, "\n  log of %s on %s (previous container: %t):", p.Name, p.Spec.NodeName, previous)
			for _, l := range lines {
				b.WriteString("\n    " + l)
			}
		}
	}
	return b.String()
}

// logLines is the last limit lines of pod's log (its previous container's
// when previous) holding one of needles.
func (h *harness) logLines(ctx context.Context, pod corev1.Pod, previous bool, needles []string, limit int) []string {
	raw, err := h.kube.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{
		Previous: previous, TailLines: ptr.To[int64](20000)}).DoRaw(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if slices.ContainsFunc(needles, func(n string) bool { return n != "" && strings.Contains(l, n) }) {
			out = append(out, l)
		}
	}
	return out[max(0, len(out)-limit):]
}
