package controller

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
)

// trimPod is the launcher pod cache's transform: managed fields and the
// container fields no controller reads (environment, mounts, probes,
// command lines, security contexts, ports, resources but the /dev/kvm
// limit), and the volumes but the PVCs' are dropped; what they read
// stays: metadata, node name, selectors and affinity, each container's
// name, image, volume devices and whether it has /dev/kvm
// (v1.RequestsKVM), the PVC volumes (vmi.ModesOfPod), the whole status. The cache holds thousands of pods and never writes one back
// (pods are created from a fresh render, deleted by name); a pod is the
// largest object it keeps.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return reconcile.StripManagedFields(obj)
	}
	pod.ManagedFields = nil
	pod.Spec.SecurityContext = nil
	pod.Spec.Tolerations = nil
	pod.Spec.DNSConfig = nil
	pod.Spec.Volumes = slices.DeleteFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim == nil })
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			trimContainer(&cs[i])
		}
	}
	return pod, nil
}

func trimContainer(c *corev1.Container) {
	c.Command, c.Args, c.WorkingDir = nil, nil, ""
	c.Env, c.EnvFrom = nil, nil
	c.Ports = nil
	c.VolumeMounts = nil
	c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
	c.SecurityContext = nil
	c.TerminationMessagePath, c.TerminationMessagePolicy = "", ""
	// Resource lists are maps of quantities, the largest part of a cached
	// pod: only the /dev/kvm limit is read (a migration's target gets the
	// source's accelerator), and only whether it is there.
	kvm, ok := c.Resources.Limits[v1.KVMResource]
	c.Resources = corev1.ResourceRequirements{}
	if ok {
		c.Resources.Limits = corev1.ResourceList{v1.KVMResource: kvm}
	}
}
