package v1

import corev1 "k8s.io/api/core/v1"

// KVMResource is the extended resource through which a launcher pod gets
// /dev/kvm from the node agent's device plugin (KubeVirt's spelling).
const KVMResource corev1.ResourceName = "devices.kubevirt.io/kvm"

// RequestsKVM reports whether a launcher pod was given /dev/kvm: one of
// its containers has a KVMResource limit. The controller decides it when
// it renders the pod; the agent reads it to pick QEMU's accelerator.
func RequestsKVM(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, c := range pod.Spec.Containers {
		if _, ok := c.Resources.Limits[KVMResource]; ok {
			return true
		}
	}
	return false
}
