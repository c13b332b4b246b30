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

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
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
