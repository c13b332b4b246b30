package deviceplugin

import (
	"errors"
	"io/fs"
	"strings"
)

// Resource names, as KubeVirt spells them.
const (
	ResourceKVM      = "devices.kubevirt.io/kvm"
	ResourceTun      = "devices.kubevirt.io/tun"
	ResourceVhostNet = "devices.kubevirt.io/vhost-net"
)

// Device is one kind of device node offered as an extended resource.
type Device struct {
	// Resource is the extended resource name, e.g. ResourceTun.
	Resource string
	// Path is the absolute path of the device node, the same on the host
	// and in the container.
	Path string
}

// KVM, Tun and VhostNet are the devices a node agent offers.
func KVM() Device      { return Device{Resource: ResourceKVM, Path: "/dev/kvm"} }
func Tun() Device      { return Device{Resource: ResourceTun, Path: "/dev/net/tun"} }
func VhostNet() Device { return Device{Resource: ResourceVhostNet, Path: "/dev/vhost-net"} }

// shortName is the part of the resource name after the domain: "tun".
func (d Device) shortName() string {
	_, name, ok := strings.Cut(d.Resource, "/")
	if !ok {
		return d.Resource
	}
	return name
}

// HostDevices returns the devices this host can offer: tun and vhost-net
// where their device nodes exist under host (the host's root, os.DirFS("/")
// in the agent), kvm only when kvmUsable. The agent decides that with
// node/launchspec/convert.DetectKVM, the same check that picks QEMU's
// accelerator: a /dev/kvm backed by kvm_pvm is not usable.
func HostDevices(host fs.FS, kvmUsable bool) []Device {
	var devs []Device
	if kvmUsable {
		devs = append(devs, KVM())
	}
	for _, d := range []Device{Tun(), VhostNet()} {
		if exists(host, d.Path) {
			devs = append(devs, d)
		}
	}
	return devs
}

// exists reports whether the absolute path p exists under host. Errors other
// than "not found" (e.g. permission denied) count as existing: the node is
// there, whether we may open it is the container's business.
func exists(host fs.FS, p string) bool {
	_, err := fs.Stat(host, strings.TrimPrefix(p, "/"))
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}
