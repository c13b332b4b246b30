package v1

// Network is a network a guest interface of the same name connects to.
//
// +kubebuilder:validation:XValidation:rule="!has(self.multus)",message="multus needs Multus (NetworkAttachmentDefinitions), which nodevirt does not support: only the pod network is available"
// +kubebuilder:validation:XValidation:rule="has(self.pod) || has(self.multus)",message="a network source must be set: only pod networks are supported"
type Network struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// Pod is the pod's own network.
	// +optional
	Pod *PodNetwork `json:"pod,omitempty"`
	// Multus is refused: secondary networks need Multus.
	// +optional
	Multus *Unsupported `json:"multus,omitempty"`
}

// PodNetwork connects the guest to the launcher pod's network.
type PodNetwork struct {
	// VMNetworkCIDR is the guest-side network of the masquerade binding;
	// default 10.0.2.0/24 (gateway .1, guest .2).
	// +optional
	// +kubebuilder:validation:MaxLength=18
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self).ip().family() == 4 && cidr(self).prefixLength() <= 30",message="must be an IPv4 CIDR with a prefix of at most /30, e.g. 10.0.2.0/24"
	VMNetworkCIDR string `json:"vmNetworkCIDR,omitempty"`
}

// DefaultVMNetworkCIDR is the masquerade guest network when none is given.
const DefaultVMNetworkCIDR = "10.0.2.0/24"
