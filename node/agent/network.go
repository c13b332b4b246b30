package agent

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/netsetup"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
	"github.com/nodevirt/nodevirt/store"
)

// Binding names as stored in store.Interface.Binding.
const (
	bindingMasquerade = string(netsetup.Masquerade)
	bindingBridge     = string(netsetup.Bridge)
)

// defaultInterfaceName is the pod interface KubeVirt adds when a VMI lists
// none (autoattachPodInterface unset or true); its binding is bridge.
const defaultInterfaceName = "default"

// qemuUID and qemuGID are the user QEMU runs as in the launcher pod
// (docs/launcher-pod.md): the owner of taps and cloud-init ISOs.
const (
	qemuUID = 107
	qemuGID = 107
)

// podInterfaces returns the netsetup input of every VMI interface on the
// pod network, in spec order, without the pod's DNS (read at Ensure time).
func podInterfaces(vmi *v1.VirtualMachineInstance) []netsetup.Input {
	networks := map[string]*v1.PodNetwork{}
	for _, n := range vmi.Spec.Networks {
		if n.Pod != nil {
			networks[n.Name] = n.Pod
		}
	}
	ifaces := vmi.Spec.Domain.Devices.Interfaces
	if len(ifaces) == 0 {
		auto := vmi.Spec.Domain.Devices.AutoattachPodInterface
		if auto != nil && !*auto {
			return nil
		}
		ifaces = []v1.Interface{{Name: defaultInterfaceName, Bridge: &v1.InterfaceBridge{}}}
		if len(vmi.Spec.Networks) == 0 {
			networks[defaultInterfaceName] = &v1.PodNetwork{}
		}
	}
	var out []netsetup.Input
	for _, i := range ifaces {
		pod, ok := networks[i.Name]
		if !ok {
			continue
		}
		in := netsetup.Input{
			VMIUID:        string(vmi.UID),
			InterfaceName: i.Name,
			Binding:       netsetup.Bridge,
			MAC:           i.MacAddress,
			UID:           qemuUID,
			GID:           qemuGID,
			Hostname:      guestHostname(vmi),
		}
		if i.Masquerade != nil {
			in.Binding = netsetup.Masquerade
			in.VMNetworkCIDR = pod.VMNetworkCIDR
			for _, p := range i.Ports {
				in.Ports = append(in.Ports, netsetup.Port{Name: p.Name, Protocol: netsetup.Protocol(p.Protocol), Port: uint16(p.Port)})
			}
		}
		out = append(out, in)
	}
	return out
}

// guestHostname is spec.hostname, else the VMI name (as KubeVirt does).
func guestHostname(vmi *v1.VirtualMachineInstance) string {
	if vmi.Spec.Hostname != "" {
		return vmi.Spec.Hostname
	}
	return vmi.Name
}

// allocate computes the network allocation of every pod interface: names,
// MAC and (masquerade) guest addresses. It is pure; the caller persists the
// result before anything is created.
func allocate(vmi *v1.VirtualMachineInstance) ([]store.Interface, error) {
	var out []store.Interface
	for _, in := range podInterfaces(vmi) {
		p, err := netsetup.NewPlan(in)
		if err != nil {
			return nil, fmt.Errorf("VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
		}
		si := store.Interface{
			Name:    in.InterfaceName,
			Binding: string(p.Binding),
			Tap:     p.Tap,
			Bridge:  p.Bridge,
			MAC:     p.GuestMAC.String(),
		}
		if p.Binding == netsetup.Masquerade {
			si.IPs = []netip.Prefix{p.GuestIP}
			si.Gateway = p.Gateway.Addr()
		}
		out = append(out, si)
	}
	return out, nil
}

// nics turns the stored allocation into the converter's per-interface
// input.
func nics(ifs []store.Interface) []convert.NIC {
	out := make([]convert.NIC, 0, len(ifs))
	for _, i := range ifs {
		out = append(out, convert.NIC{Name: i.Name, Tap: i.Tap, MAC: i.MAC})
	}
	return out
}

// plans rebuilds the netsetup plans of a VMI, with the pod's DNS read from
// the netns owner's resolv.conf (/proc/<pid>/root/etc/resolv.conf). The
// MACs come from the record, so a plan never changes under a running guest.
func plans(vmi *v1.VirtualMachineInstance, rec *store.Record, pid int) ([]netsetup.Plan, error) {
	dns := podDNS(pid)
	stored := map[string]store.Interface{}
	for _, i := range rec.Interfaces {
		stored[i.Name] = i
	}
	var out []netsetup.Plan
	for _, in := range podInterfaces(vmi) {
		if s, ok := stored[in.InterfaceName]; ok {
			in.MAC = s.MAC
		}
		in.DNS = dns
		p, err := netsetup.NewPlan(in)
		if err != nil {
			return nil, fmt.Errorf("VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// podDNS reads the pod's resolv.conf through the launcher's root; a pod
// without one gets no DNS servers.
func podDNS(pid int) netsetup.DNS {
	b, err := os.ReadFile(filepath.Join("/proc", fmt.Sprint(pid), "root", "etc", "resolv.conf"))
	if err != nil {
		return netsetup.DNS{}
	}
	dns, err := netsetup.ParseResolvConf(bytes.NewReader(b))
	if err != nil {
		return netsetup.DNS{}
	}
	return dns
}

// netnsPath is the network namespace of the host process pid.
func netnsPath(pid int) string { return filepath.Join("/proc", fmt.Sprint(pid), "ns", "net") }

// recordResults stores what Ensure found (pod IPs, gateway) in the
// record's interfaces.
func recordResults(ifs []store.Interface, res []netsetup.Result) []store.Interface {
	byName := map[string]netsetup.Result{}
	for _, r := range res {
		byName[r.Tap] = r
	}
	out := append([]store.Interface(nil), ifs...)
	for k := range out {
		r, ok := byName[out[k].Tap]
		if !ok {
			continue
		}
		out[k].IPs = []netip.Prefix{r.GuestIP}
		out[k].Gateway = r.Gateway
		if r.PodIP.IsValid() {
			out[k].PodIPs = []netip.Prefix{r.PodIP}
		}
		out[k].MAC = net.HardwareAddr(r.GuestMAC).String()
	}
	return out
}

// ensureNetwork builds every interface's network in the netns and returns
// the results.
func ensureNetwork(ctx context.Context, n Network, nsPath string, ps []netsetup.Plan) ([]netsetup.Result, error) {
	var out []netsetup.Result
	for _, p := range ps {
		r, err := n.Ensure(ctx, nsPath, p)
		if err != nil {
			return nil, fmt.Errorf("network of interface tap %q: %w", p.Tap, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// releasePlans are the plans netsetup.Release needs, rebuilt from the
// record alone (names and binding), so a VMI that is already gone from the
// API is released too.
func releasePlans(ifs []store.Interface) []netsetup.Plan {
	out := make([]netsetup.Plan, 0, len(ifs))
	for _, i := range ifs {
		out = append(out, netsetup.Plan{
			Binding:      netsetup.Binding(i.Binding),
			PodInterface: netsetup.DefaultPodInterface,
			Bridge:       i.Bridge,
			Tap:          i.Tap,
		})
	}
	return out
}
