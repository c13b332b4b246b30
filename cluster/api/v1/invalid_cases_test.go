package v1_test

import (
	"strings"
)

// invalidCase is a valid testdata manifest broken by mutate; the API server
// must reject it with an error containing field and detail.
type invalidCase struct {
	name    string
	file    string
	version string // "" keeps the file's apiVersion
	mutate  func(obj map[string]any)
	field   string
	detail  string
}

const (
	vmFile     = "vm-kubevirt-v1.yaml"
	vmiFile    = "vmi-all-fields.yaml"
	domainFile = "vmi-domain-fields.yaml"
)

// tmpl is the path of the VMI spec inside a VirtualMachine.
var tmpl = []any{"spec", "template", "spec"}

func invalidCases() []invalidCase {
	return append(domainInvalidCases(), []invalidCase{
		{
			name: "disk-without-volume", file: vmiFile,
			mutate: func(o map[string]any) {
				appendTo(o, map[string]any{"name": "ghost", "disk": map[string]any{}}, "spec", "domain", "devices", "disks")
			},
			field: "spec.domain.devices.disks", detail: "every disk must name a volume",
		},
		{
			name: "vm-disk-without-volume", file: vmFile,
			mutate: func(o map[string]any) {
				set(o, "nothere", append(tmpl, "volumes", 0, "name")...)
			},
			field: "spec.template.spec.domain.devices.disks", detail: "every disk must name a volume",
		},
		{
			name: "interface-two-bindings", file: vmiFile,
			mutate: func(o map[string]any) {
				set(o, map[string]any{}, "spec", "domain", "devices", "interfaces", 0, "bridge")
			},
			field: "spec.domain.devices.interfaces[0]", detail: "exactly one binding method",
		},
		{
			name: "interface-no-binding", file: vmFile,
			mutate: func(o map[string]any) {
				del(o, append(tmpl, "domain", "devices", "interfaces", 0, "masquerade")...)
			},
			field: "spec.template.spec.domain.devices.interfaces[0]", detail: "exactly one binding method",
		},
		{
			name: "interface-without-network", file: vmiFile,
			mutate: func(o map[string]any) {
				set(o, "other", "spec", "domain", "devices", "interfaces", 0, "name")
			},
			field: "spec.domain.devices.interfaces", detail: "every interface must name a network",
		},
		{
			name: "running-and-runstrategy", file: vmFile,
			mutate: func(o map[string]any) { set(o, true, "spec", "running") },
			field:  "spec.running", detail: "mutually exclusive",
		},
		{
			name: "unknown-runstrategy", file: vmFile,
			mutate: func(o map[string]any) { set(o, "Sometimes", "spec", "runStrategy") },
			field:  "spec.runStrategy", detail: "Unsupported value",
		},
		{
			name: "memory-abc", file: vmiFile,
			mutate: func(o map[string]any) { set(o, "abc", "spec", "domain", "memory", "guest") },
			field:  "spec.domain.memory.guest", detail: "should match",
		},
		{
			name: "vm-request-memory-abc", file: vmFile,
			mutate: func(o map[string]any) {
				set(o, "abc", append(tmpl, "domain", "resources", "requests", "memory")...)
			},
			field: "spec.template.spec.domain.resources.requests.memory", detail: "should match",
		},
		{
			name: "cpu-quantity", file: vmiFile,
			mutate: func(o map[string]any) { set(o, "2 cores", "spec", "domain", "resources", "limits", "cpu") },
			field:  "spec.domain.resources.limits.cpu", detail: "should match",
		},
		{
			name: "no-memory", file: vmiFile,
			mutate: func(o map[string]any) {
				del(o, "spec", "domain", "memory")
				del(o, "spec", "domain", "resources", "requests", "memory")
			},
			field: "spec.domain.memory.guest", detail: "guest memory is not set",
		},
		{
			name: "vmi-name-too-long-" + strings.Repeat("x", 46), file: vmiFile,
			field: "metadata.name", detail: "no more than 63 characters",
		},
		{
			name: "vm-name-too-long-" + strings.Repeat("y", 47), file: vmFile,
			field: "metadata.name", detail: "no more than 63 characters",
		},
		{
			name: "duplicate-disk", file: vmiFile,
			mutate: func(o map[string]any) {
				appendTo(o, map[string]any{"name": "root", "disk": map[string]any{}}, "spec", "domain", "devices", "disks")
			},
			field: "spec.domain.devices.disks[5]", detail: "Duplicate value",
		},
		{
			name: "duplicate-boot-order", file: vmiFile,
			mutate: func(o map[string]any) { set(o, 1, "spec", "domain", "devices", "disks", 2, "bootOrder") },
			field:  "spec.domain.devices.disks", detail: "bootOrder must be unique",
		},
		{
			name: "vm-duplicate-boot-order", file: vmFile,
			mutate: func(o map[string]any) {
				set(o, 2, append(tmpl, "domain", "devices", "disks", 0, "bootOrder")...)
				appendTo(o, map[string]any{"name": "second", "bootOrder": 2, "disk": map[string]any{}}, append(tmpl, "domain", "devices", "disks")...)
				appendTo(o, map[string]any{"name": "second", "emptyDisk": map[string]any{"capacity": "1Gi"}}, append(tmpl, "volumes")...)
			},
			field: "spec.template.spec.domain.devices.disks", detail: "bootOrder must be unique",
		},
		{
			name: "duplicate-volume", file: vmFile,
			mutate: func(o map[string]any) {
				appendTo(o, map[string]any{"name": "containerdisk", "emptyDisk": map[string]any{"capacity": "1Gi"}}, append(tmpl, "volumes")...)
			},
			field: "spec.template.spec.volumes[2]", detail: "Duplicate value",
		},
		{
			name: "duplicate-interface", file: vmiFile,
			mutate: func(o map[string]any) {
				appendTo(o, map[string]any{"name": "default", "bridge": map[string]any{}}, "spec", "domain", "devices", "interfaces")
			},
			field: "spec.domain.devices.interfaces[1]", detail: "Duplicate value",
		},
		{
			name: "unsupported-sriov", file: vmFile,
			mutate: func(o map[string]any) {
				set(o, map[string]any{}, append(tmpl, "domain", "devices", "interfaces", 0, "sriov")...)
			},
			field: "spec.template.spec.domain.devices.interfaces[0].sriov", detail: "unknown field",
		},
		{
			name: "unsupported-datavolumetemplates", file: vmFile,
			mutate: func(o map[string]any) {
				set(o, []any{map[string]any{"metadata": map[string]any{"name": "dv"}}}, "spec", "dataVolumeTemplates")
			},
			field: "spec.dataVolumeTemplates", detail: "need CDI",
		},
		{
			name: "unsupported-bootloader", file: vmiFile,
			mutate: func(o map[string]any) {
				set(o, map[string]any{"grub": map[string]any{}}, "spec", "domain", "firmware", "bootloader")
			},
			field: "spec.domain.firmware.bootloader.grub", detail: "unknown field",
		},
		{
			name: "v1alpha3-memory-abc", file: vmFile, version: "v1alpha3",
			mutate: func(o map[string]any) { set(o, "abc", append(tmpl, "domain", "resources", "requests", "memory")...) },
			field:  "spec.template.spec.domain.resources.requests.memory", detail: "should match",
		},
		{
			name: "bad-bus", file: vmiFile,
			mutate: func(o map[string]any) { set(o, "ide", "spec", "domain", "devices", "disks", 0, "disk", "bus") },
			field:  "spec.domain.devices.disks[0].disk.bus", detail: "Unsupported value",
		},
		{
			name: "bad-machine-type", file: vmiFile,
			mutate: func(o map[string]any) { set(o, "q35,accel=kvm", "spec", "domain", "machine", "type") },
			field:  "spec.domain.machine.type", detail: "should match",
		},
		{
			name: "bad-mac", file: vmiFile,
			mutate: func(o map[string]any) {
				set(o, "02:00:00:00:00", "spec", "domain", "devices", "interfaces", 0, "macAddress")
			},
			field: "spec.domain.devices.interfaces[0].macAddress", detail: "should match",
		},
		{
			name: "bad-vm-network-cidr", file: vmiFile,
			mutate: func(o map[string]any) { set(o, "10.0.2.0/31", "spec", "networks", 0, "pod", "vmNetworkCIDR") },
			field:  "spec.networks[0].pod.vmNetworkCIDR", detail: "IPv4 CIDR",
		},
		{
			name: "two-volume-sources", file: vmiFile,
			mutate: func(o map[string]any) {
				set(o, map[string]any{"capacity": "1Gi"}, "spec", "volumes", 0, "emptyDisk")
			},
			field: "spec.volumes[0]", detail: "exactly one volume source",
		},
		{
			name: "ports-with-bridge", file: vmiFile,
			mutate: func(o map[string]any) {
				del(o, "spec", "domain", "devices", "interfaces", 0, "masquerade")
				set(o, map[string]any{}, "spec", "domain", "devices", "interfaces", 0, "bridge")
			},
			field: "spec.domain.devices.interfaces[0].ports", detail: "only be declared with the masquerade binding",
		},
	}...)
}

// walk returns the container holding the last element of path, creating maps
// on the way.
func walk(o map[string]any, path []any) (any, any) {
	var cur any = o
	for _, p := range path[:len(path)-1] {
		switch k := p.(type) {
		case string:
			m := cur.(map[string]any)
			if _, ok := m[k]; !ok {
				m[k] = map[string]any{}
			}
			cur = m[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur, path[len(path)-1]
}

func set(o map[string]any, v any, path ...any) {
	c, last := walk(o, path)
	switch k := last.(type) {
	case string:
		c.(map[string]any)[k] = v
	case int:
		c.([]any)[k] = v
	}
}

func del(o map[string]any, path ...any) {
	c, last := walk(o, path)
	delete(c.(map[string]any), last.(string))
}

func appendTo(o map[string]any, v any, path ...any) {
	c, last := walk(o, path)
	m := c.(map[string]any)
	list, _ := m[last.(string)].([]any)
	m[last.(string)] = append(list, v)
}
