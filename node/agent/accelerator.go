package agent

import (
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/deviceplugin"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

// podKVM is the KVM a launcher pod's QEMU can use: the node's, if the pod
// was given /dev/kvm (a devices.kubevirt.io/kvm request, which the device
// plugin answers with the device). A pod the controller rendered for
// emulation (useEmulation) does not request it, and QEMU in such a pod on
// a KVM node gets TCG instead of failing to open /dev/kvm.
func podKVM(node convert.KVM, pod *corev1.Pod) convert.KVM {
	if !node.Usable || v1.RequestsKVM(pod) {
		return node
	}
	return convert.KVM{Reason: "the launcher pod was not given /dev/kvm (no " + deviceplugin.ResourceKVM +
		" request: the controller chose emulation for this VMI, by useEmulation)"}
}
