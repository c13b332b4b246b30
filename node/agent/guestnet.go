package agent

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

// infoSourceBoth marks an interface seen by QEMU and by the guest agent.
const infoSourceBoth = "domain, guest-agent"

// guestNet is the guest's view of its interfaces. Known is false until the
// guest agent answered guest-network-get-interfaces since the domain was
// attached (in this agent process).
type guestNet struct {
	Known      bool
	Interfaces []qmp.NetworkInterface
}

// probeGuestNet asks the guest agent for the guest's interfaces and
// reports whether they changed; the caller enqueues. Errors keep the last
// answer.
func (d *domain) probeGuestNet(ctx context.Context, ga GuestAgent) bool {
	if ga == nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, agentTimeout)
	ifs, err := ga.NetworkInterfaces(pctx)
	cancel()
	if err != nil {
		return false
	}
	d.mu.Lock()
	changed := !d.guestNet.Known || !slices.EqualFunc(d.guestNet.Interfaces, ifs, sameGuestInterface)
	d.guestNet = guestNet{Known: true, Interfaces: ifs}
	d.mu.Unlock()
	return changed
}

func sameGuestInterface(x, y qmp.NetworkInterface) bool {
	return x.Name == y.Name && x.HardwareAddress == y.HardwareAddress && slices.Equal(x.IPAddresses, y.IPAddresses)
}

// guestInterfaces returns the last guest view.
func (d *domain) guestInterfaces() guestNet {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.guestNet
}

// masqueraded returns the names of the record's masquerade interfaces.
func masqueraded(r *store.Record) map[string]bool {
	out := map[string]bool{}
	if r == nil {
		return out
	}
	for _, i := range r.Interfaces {
		if i.Binding == bindingMasquerade {
			out[i.Name] = true
		}
	}
	return out
}

// mergeGuestNet adds what the guest agent reports to the domain's view of
// the interfaces (matched by MAC): the guest's interface name, and, except
// behind masquerade (where the guest's address is private to the pod and
// the pod IP is the VMI's), its global addresses. Until the guest agent has
// answered since attach, the guest part of cur is kept, so an agent
// restart changes nothing. It is pure.
func mergeGuestNet(domain []v1.VirtualMachineInstanceNetworkInterface, g guestNet, masq map[string]bool,
	cur []v1.VirtualMachineInstanceNetworkInterface,
) []v1.VirtualMachineInstanceNetworkInterface {
	if domain == nil {
		return nil
	}
	out := slices.Clone(domain)
	for i := range out {
		if !g.Known {
			if c := findByName(cur, out[i].Name); c != nil && c.InfoSource == infoSourceBoth {
				out[i].InterfaceName, out[i].InfoSource = c.InterfaceName, c.InfoSource
				if !masq[out[i].Name] {
					// Behind masquerade the address is the pod's, which
					// the domain knows (and a migration changes).
					out[i].IPAddresses, out[i].IPAddress = c.IPAddresses, c.IPAddress
				}
			}
			continue
		}
		gi := findByMAC(g.Interfaces, out[i].MAC)
		if gi == nil {
			continue
		}
		out[i].InterfaceName, out[i].InfoSource = gi.Name, infoSourceBoth
		if masq[out[i].Name] {
			continue
		}
		out[i].IPAddresses = slices.Clone(out[i].IPAddresses)
		for _, a := range gi.IPAddresses {
			ip, err := netip.ParseAddr(a.Address)
			if err != nil || !ip.IsGlobalUnicast() || slices.Contains(out[i].IPAddresses, ip.String()) {
				continue
			}
			out[i].IPAddresses = append(out[i].IPAddresses, ip.String())
		}
		if out[i].IPAddress == "" && len(out[i].IPAddresses) > 0 {
			out[i].IPAddress = out[i].IPAddresses[0]
		}
	}
	return out
}

func findByName(ifs []v1.VirtualMachineInstanceNetworkInterface, name string) *v1.VirtualMachineInstanceNetworkInterface {
	for i := range ifs {
		if ifs[i].Name == name {
			return &ifs[i]
		}
	}
	return nil
}

func findByMAC(ifs []qmp.NetworkInterface, mac string) *qmp.NetworkInterface {
	for i := range ifs {
		if mac != "" && strings.EqualFold(ifs[i].HardwareAddress, mac) {
			return &ifs[i]
		}
	}
	return nil
}
