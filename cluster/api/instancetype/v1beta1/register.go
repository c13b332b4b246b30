package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is KubeVirt's instancetype API group.
const GroupName = "instancetype.kubevirt.io"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1beta1"}

// Kinds, as spec.instancetype.kind and spec.preference.kind name them.
const (
	InstancetypeKind        = "VirtualMachineInstancetype"
	ClusterInstancetypeKind = "VirtualMachineClusterInstancetype"
	PreferenceKind          = "VirtualMachinePreference"
	ClusterPreferenceKind   = "VirtualMachineClusterPreference"
)

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
		&VirtualMachineInstancetype{}, &VirtualMachineInstancetypeList{},
		&VirtualMachineClusterInstancetype{}, &VirtualMachineClusterInstancetypeList{},
		&VirtualMachinePreference{}, &VirtualMachinePreferenceList{},
		&VirtualMachineClusterPreference{}, &VirtualMachineClusterPreferenceList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
