package rbac_test

import (
	"strings"
)

const (
	core = "kubevirt.io"
	sub  = "subresources.kubevirt.io"
)

// access is one question to a role: may its holder do verb on resource
// (resource/subresource for subresources) in group?
type access struct {
	group, resource, verb string
	want                  bool
}

func (a access) String() string {
	return a.verb + " " + a.group + "/" + a.resource
}

// subresource splits resource into the resource and subresource fields of
// a SubjectAccessReview: virtualmachineinstances/vnc/screenshot becomes
// virtualmachineinstances and vnc/screenshot.
func (a access) subresource() (resource, subresource string) {
	resource, subresource, _ = strings.Cut(a.resource, "/")
	return resource, subresource
}

func allow(group, resource string, verbs ...string) []access {
	return expect(true, group, resource, verbs...)
}

func deny(group, resource string, verbs ...string) []access {
	return expect(false, group, resource, verbs...)
}

func expect(want bool, group, resource string, verbs ...string) []access {
	out := make([]access, len(verbs))
	for i, v := range verbs {
		out[i] = access{group: group, resource: resource, verb: v, want: want}
	}
	return out
}

func join(lists ...[]access) []access {
	var out []access
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// The lifecycle actions virtctl sends as PUT (RBAC verb update).
var (
	vmiActions = []string{"pause", "unpause", "softreboot", "reset", "freeze", "unfreeze"}
	vmActions  = []string{"start", "stop", "restart"}
	guestData  = []string{"guestosinfo", "userlist", "filesystemlist"}
	streams    = []string{"console", "vnc", "vnc/screenshot", "portforward"}
	crud       = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
)

func each(group, prefix string, names []string, want bool, verb string) []access {
	var out []access
	for _, n := range names {
		out = append(out, expect(want, group, prefix+n, verb)...)
	}
	return out
}

// expectations lists, per ClusterRole, the accesses KubeVirt v1.6.0's role
// of the same name grants and refuses that matter to virtctl users.
func expectations() map[string][]access {
	operate := join(
		each(sub, "virtualmachineinstances/", guestData, true, "get"),
		each(sub, "virtualmachineinstances/", streams, true, "get"),
		allow(sub, "virtualmachines/portforward", "get"),
		allow(sub, "virtualmachines/expand-spec", "get"),
		each(sub, "virtualmachineinstances/", vmiActions, true, "update"),
		each(sub, "virtualmachines/", vmActions, true, "update"),
		allow(core, "virtualmachines", crud...),
		allow(core, "virtualmachineinstances", crud...),
		allow(core, "virtualmachineinstancemigrations", "get", "list", "watch"),
		deny(core, "virtualmachineinstancemigrations", "create", "update", "delete"),
		deny(sub, "virtualmachines/migrate", "update"),
	)
	return map[string][]access{
		"kubevirt.io:view": join(
			each(sub, "virtualmachineinstances/", guestData, true, "get"),
			allow(sub, "virtualmachines/expand-spec", "get"),
			allow(core, "virtualmachines", "get", "list", "watch"),
			allow(core, "virtualmachineinstances", "get", "list", "watch"),
			allow(core, "virtualmachineinstancemigrations", "get", "list", "watch"),
			each(sub, "virtualmachineinstances/", streams, false, "get"),
			deny(sub, "virtualmachines/portforward", "get"),
			each(sub, "virtualmachineinstances/", vmiActions, false, "update"),
			each(sub, "virtualmachines/", vmActions, false, "update"),
			deny(sub, "virtualmachines/migrate", "update"),
			deny(core, "virtualmachines", "create", "update", "patch", "delete"),
			deny(core, "virtualmachineinstances", "create", "update", "patch", "delete"),
		),
		"kubevirt.io:edit": join(operate,
			deny(core, "virtualmachines", "deletecollection"),
			deny(core, "virtualmachineinstances", "deletecollection"),
		),
		"kubevirt.io:admin": join(operate,
			allow(core, "virtualmachines", "deletecollection"),
			allow(core, "virtualmachineinstances", "deletecollection"),
		),
		"kubevirt.io:migrate": join(
			allow(sub, "virtualmachines/migrate", "update"),
			allow(core, "virtualmachineinstancemigrations", append(crud, "deletecollection")...),
			deny(sub, "virtualmachineinstances/console", "get"),
			deny(sub, "virtualmachines/start", "update"),
			deny(core, "virtualmachines", "get"),
		),
		"kubevirt.io:default": join(
			allow(sub, "version", "get", "list"),
			allow(sub, "guestfs", "get", "list"),
			allow(core, "kubevirts", "get", "list"),
			deny(sub, "healthz", "get"),
			deny(core, "virtualmachines", "get"),
			deny(sub, "virtualmachineinstances/guestosinfo", "get"),
		),
	}
}
