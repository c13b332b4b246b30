package v1

// InstancetypeMatcher is spec.instancetype: the instancetype whose CPU and
// memory the VM's VMI gets (cluster/instancetype).
//
// +kubebuilder:validation:XValidation:rule="!has(self.inferFromVolume)",fieldPath=".inferFromVolume",message="spec.instancetype.inferFromVolume is not supported by nodevirt: inferring needs CDI DataVolumes and DataSources; name the instancetype in spec.instancetype.name",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.inferFromVolumeFailurePolicy)",fieldPath=".inferFromVolumeFailurePolicy",message="spec.instancetype.inferFromVolumeFailurePolicy is not supported by nodevirt: inferring needs CDI DataVolumes and DataSources",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="has(self.name) || has(self.inferFromVolume)",fieldPath=".name",message="Either Name or InferFromVolume should be provided within the InstancetypeMatcher",reason=FieldValueRequired
type InstancetypeMatcher struct {
	// Name of the VirtualMachineInstancetype or
	// VirtualMachineClusterInstancetype.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Kind is VirtualMachineInstancetype or VirtualMachineClusterInstancetype
	// (the default), or their lower-case resource names.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii() in ['virtualmachineinstancetype', 'virtualmachineinstancetypes', 'virtualmachineclusterinstancetype', 'virtualmachineclusterinstancetypes']",message="kind must be VirtualMachineInstancetype or VirtualMachineClusterInstancetype"
	Kind string `json:"kind,omitempty"`
	// RevisionName names a ControllerRevision of this VM holding the
	// instancetype to use instead of the current object.
	// +optional
	RevisionName string `json:"revisionName,omitempty"`
	// InferFromVolume is KubeVirt's; nodevirt refuses it (it needs CDI).
	// +optional
	InferFromVolume string `json:"inferFromVolume,omitempty"`
	// InferFromVolumeFailurePolicy is KubeVirt's; nodevirt refuses it.
	// +optional
	InferFromVolumeFailurePolicy *string `json:"inferFromVolumeFailurePolicy,omitempty"`
}

// PreferenceMatcher is spec.preference: the preference whose values fill
// what the VM's template leaves unset (cluster/instancetype).
//
// +kubebuilder:validation:XValidation:rule="!has(self.inferFromVolume)",fieldPath=".inferFromVolume",message="spec.preference.inferFromVolume is not supported by nodevirt: inferring needs CDI DataVolumes and DataSources; name the preference in spec.preference.name",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="!has(self.inferFromVolumeFailurePolicy)",fieldPath=".inferFromVolumeFailurePolicy",message="spec.preference.inferFromVolumeFailurePolicy is not supported by nodevirt: inferring needs CDI DataVolumes and DataSources",reason=FieldValueForbidden
// +kubebuilder:validation:XValidation:rule="has(self.name) || has(self.inferFromVolume)",fieldPath=".name",message="Either Name or InferFromVolume should be provided within the PreferenceMatcher",reason=FieldValueRequired
type PreferenceMatcher struct {
	// Name of the VirtualMachinePreference or VirtualMachineClusterPreference.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Kind is VirtualMachinePreference or VirtualMachineClusterPreference
	// (the default), or their lower-case resource names.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.lowerAscii() in ['virtualmachinepreference', 'virtualmachinepreferences', 'virtualmachineclusterpreference', 'virtualmachineclusterpreferences']",message="kind must be VirtualMachinePreference or VirtualMachineClusterPreference"
	Kind string `json:"kind,omitempty"`
	// RevisionName names a ControllerRevision of this VM holding the
	// preference to use instead of the current object.
	// +optional
	RevisionName string `json:"revisionName,omitempty"`
	// InferFromVolume is KubeVirt's; nodevirt refuses it (it needs CDI).
	// +optional
	InferFromVolume string `json:"inferFromVolume,omitempty"`
	// InferFromVolumeFailurePolicy is KubeVirt's; nodevirt refuses it.
	// +optional
	InferFromVolumeFailurePolicy *string `json:"inferFromVolumeFailurePolicy,omitempty"`
}

// InstancetypeStatusRef is status.instancetypeRef and status.preferenceRef:
// the object the VM resolved and the ControllerRevision that captured it.
type InstancetypeStatusRef struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	Kind string `json:"kind,omitempty"`
	// ControllerRevisionRef names the VM's ControllerRevision holding the
	// captured object; the VMI is expanded from it.
	// +optional
	ControllerRevisionRef *ControllerRevisionRef `json:"controllerRevisionRef,omitempty"`
}

// ControllerRevisionRef names a ControllerRevision in the VM's namespace.
type ControllerRevisionRef struct {
	// +optional
	Name string `json:"name,omitempty"`
}
