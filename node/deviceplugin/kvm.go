package deviceplugin

import "io/fs"

// KVMStatus says whether hardware virtualization is usable for ordinary
// guests on this host.
type KVMStatus struct {
	Usable bool
	// Reason explains the verdict, for logs.
	Reason string
}

// DetectKVM decides from files under host (the host's root; os.DirFS("/")
// in the agent, fstest.MapFS in tests) whether KVM is usable:
//
//   - no dev/kvm: not usable;
//   - sys/module/kvm_pvm present: not usable (kvm_pvm is a paging-based
//     nested hypervisor under which ordinary guest kernels die);
//   - sys/module/kvm_intel or sys/module/kvm_amd present: usable;
//   - otherwise not usable (an unknown KVM backend).
//
// node/launchspec has the same rules for choosing the accelerator; this copy
// exists until one detector lives on main for both.
func DetectKVM(host fs.FS) KVMStatus {
	switch {
	case !exists(host, "/dev/kvm"):
		return KVMStatus{Reason: "/dev/kvm does not exist"}
	case exists(host, "/sys/module/kvm_pvm"):
		return KVMStatus{Reason: "/dev/kvm is backed by kvm_pvm, which cannot run ordinary guests"}
	case exists(host, "/sys/module/kvm_intel"):
		return KVMStatus{Usable: true, Reason: "kvm_intel is loaded"}
	case exists(host, "/sys/module/kvm_amd"):
		return KVMStatus{Usable: true, Reason: "kvm_amd is loaded"}
	default:
		return KVMStatus{Reason: "/dev/kvm exists but neither kvm_intel nor kvm_amd is loaded"}
	}
}
