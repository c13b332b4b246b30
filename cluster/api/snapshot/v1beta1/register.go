package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is KubeVirt's snapshot API group.
const GroupName = "snapshot.kubevirt.io"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// Resource takes an unqualified resource name and returns it group-qualified.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// SchemeBuilder registers the types of this package with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&VirtualMachineSnapshot{}, &VirtualMachineSnapshotList{},
		&VirtualMachineSnapshotContent{}, &VirtualMachineSnapshotContentList{},
		&VirtualMachineRestore{}, &VirtualMachineRestoreList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
