package operator

// Component is one part of nodevirt the operator installs: its manifest
// file (a multi-document YAML rendered from deploy/<Name> when the
// operator's image is built) in the manifests directory.
type Component struct {
	Name string
	// Keep: the component's objects stay when the KubeVirt resource is
	// deleted (the CRDs, as KubeVirt's operator keeps them, and with them
	// every VM).
	Keep bool
	// Placement: which of spec.infra and spec.workloads places the
	// component's workloads.
	Placement Placement
	// Flags names the map of spec.customizeComponents.flags for the main
	// container of the component's workloads (KubeVirt's names: api,
	// controller, handler); "" none.
	Flags string
}

// File is the component's manifest file name.
func (c Component) File() string { return c.Name + ".yaml" }

// Components are installed in this order and removed in the reverse one.
// A new component joins nodevirt by one entry here and its directory under
// deploy/ (make operator-manifests renders each).
var Components = []Component{
	{Name: "crds", Keep: true},
	{Name: "rbac"},
	{Name: "admission"},
	{Name: "controller", Placement: Infra, Flags: "controller"},
	{Name: "agent", Placement: Workloads, Flags: "handler"},
	{Name: "api", Placement: Infra, Flags: "api"},
}
