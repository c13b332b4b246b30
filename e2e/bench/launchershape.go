package main

import (
	"context"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The launcher-shaped pods are the burst's second floor: the launcher pod
// the controller renders for a burst VMI, with no VMI behind it. They have
// the same containers, image volumes (or holder and init containers in the
// fallback shape), emptyDirs, security context, resources and tun device
// request, and their launcher starts and waits for an agent that never
// comes. Their start is the kubelet's, containerd's and the device
// plugin's share of a VMI's start; what a VMI takes beyond it is the
// controller's, the agent's, QEMU's and the VMI's API writes.

// shapeVMIName is the VMI whose launcher pod the template is taken from.
const shapeVMIName = "burst-shape"

// launcherPodTemplate creates one burst VMI, takes its launcher pod as the
// controller rendered it, deletes the VMI again and waits until it and its
// pod are gone. The template is launcherShaped's.
func launcherPodTemplate(ctx context.Context, e *env) (*corev1.Pod, error) {
	vmi, err := newVMI(pausedVMI, shapeVMIName)
	if err != nil {
		return nil, err
	}
	if _, err := e.createVMI(ctx, vmi); err != nil {
		return nil, err
	}
	var pod *corev1.Pod
	err = poll(ctx, 2*time.Minute, 100*time.Millisecond, "the launcher pod of VMI "+shapeVMIName, func() (bool, error) {
		got, err := e.virt.KubevirtV1().VirtualMachineInstances(benchNamespace).Get(ctx, shapeVMIName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod, err = e.launcherPod(ctx, string(got.UID))
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	// It is the only VMI in the namespace.
	if err := e.deleteVMIs(ctx); err != nil {
		return nil, err
	}
	return launcherShaped(pod, e.node.Name), nil
}

// launcherShaped is a launcher pod's spec for a floor pod: placed on node
// like the bare pods, owned by nothing, carrying barePodLabel instead of
// the launcher labels, so neither the controller nor the agent takes it
// for a VMI's. It is pure.
func launcherShaped(launcher *corev1.Pod, node string) *corev1.Pod {
	spec := launcher.Spec.DeepCopy()
	spec.NodeName = ""
	spec.NodeSelector = maps.Clone(spec.NodeSelector)
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{}
	}
	spec.NodeSelector[corev1.LabelHostname] = node
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{barePodLabel: "true"}},
		Spec:       *spec,
	}
}

// launcherShapedPods returns the floor's pod factory from template.
func launcherShapedPods(template *corev1.Pod) func(name string) *corev1.Pod {
	return func(name string) *corev1.Pod {
		p := template.DeepCopy()
		p.Name = name
		return p
	}
}
