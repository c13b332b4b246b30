package convert_test

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

// The agent detects KVM once, then builds a spec per VMI from the VMI, the
// network results (netsetup) and the pod layout.
func ExampleBuild() {
	kvm := convert.DetectKVM(os.DirFS("/"))
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "default", UID: "6a1e2c5e-7d0b-4f59-9a57-0d3c1f7c2b11"},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Memory: &v1.Memory{Guest: resource.NewQuantity(128<<20, resource.BinarySI)},
		}},
	}
	spec, err := convert.Build(convert.Input{
		VMI:            vmi,
		Node:           convert.NodeFacts{KVM: kvm},
		AllowEmulation: true,
		Interfaces:     []convert.NIC{{Name: "default", Tap: "nvtap0", MAC: "02:00:00:00:00:01"}},
		Paths:          launchspec.DefaultPaths(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.Args[0], spec.Args[1])
	// Output: -name guest=default_vm,debug-threads=on
}
