package v1

// Unsupported is the schema of a KubeVirt field that needs a project nodevirt
// does not provide (CDI's DataVolumes, Multus networks) or that nodevirt
// refuses by design (hostDisk). The field stays in the schema with any
// content so that admission refuses it with a message naming the field and
// what provides it, rather than pruning it or answering "unknown field".
// No object holding one is ever stored.
//
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:Type=object
type Unsupported struct{}
