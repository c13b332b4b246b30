package controller

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/nodevirt/nodevirt/cluster/reconcile"
)

// trimPod is the launcher pod cache's transform: managed fields and the
// container fields no controller reads (environment, mounts, probes,
// command lines, security contexts, ports) are dropped; what they read
// stays: metadata, node name, selectors and affinity, each container's
// name, image, resources and volume devices, the volumes, the whole
// status. The cache holds thousands of pods and never writes one back
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
}
