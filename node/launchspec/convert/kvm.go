package convert

import (
	"errors"
	"io/fs"
)

// KVM says whether hardware virtualization is usable for ordinary guests.
type KVM struct {
	Usable bool
	// Reason explains the verdict, e.g. "kvm_pvm is loaded".
	Reason string
}

// DetectKVM decides whether KVM is usable from files under fsys, which is
// the host's root (os.DirFS("/") in the agent; fstest.MapFS in tests):
//
//   - no dev/kvm: unusable;
//   - sys/module/kvm_pvm present: unusable (a paging-based nested
//     hypervisor ordinary guest kernels die under);
//   - sys/module/kvm_intel or sys/module/kvm_amd present: usable;
//   - otherwise unusable (an unknown KVM backend).
func DetectKVM(fsys fs.FS) KVM {
	exists := func(name string) bool {
		_, err := fs.Stat(fsys, name)
		return err == nil || !errors.Is(err, fs.ErrNotExist)
	}
	switch {
	case !exists("dev/kvm"):
		return KVM{Reason: "/dev/kvm does not exist"}
	case exists("sys/module/kvm_pvm"):
		return KVM{Reason: "/dev/kvm is backed by kvm_pvm, which cannot run ordinary guests"}
	case exists("sys/module/kvm_intel"):
		return KVM{Usable: true, Reason: "kvm_intel is loaded"}
	case exists("sys/module/kvm_amd"):
		return KVM{Usable: true, Reason: "kvm_amd is loaded"}
	default:
		return KVM{Reason: "/dev/kvm exists but neither kvm_intel nor kvm_amd is loaded"}
	}
}
