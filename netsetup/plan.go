package netsetup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Binding is how a VMI interface is attached to the pod network.
type Binding string

// The bindings this package builds.
const (
	// Masquerade puts the guest on a private subnet behind NAT on the pod IP.
	Masquerade Binding = "masquerade"
	// Bridge moves the pod IP to the guest; the pod interface joins a bridge.
	Bridge Binding = "bridge"
)

// ReasonInterfaceNotLiveMigratable is the KubeVirt reason the agent puts on
// the VMI's LiveMigratable=False condition when [Binding.LiveMigratable] is
// false.
const ReasonInterfaceNotLiveMigratable = "InterfaceNotLiveMigratable"

// LiveMigratable reports whether a VMI using this binding on the pod network
// can be live-migrated. A bridge-bound guest owns the pod IP, which the
// migration target pod cannot take over, so it is not.
func (b Binding) LiveMigratable() bool { return b == Masquerade }

// Protocol is a transport protocol of a declared port.
type Protocol string

// Protocols accepted in ports[].
const (
	TCP Protocol = "TCP"
	UDP Protocol = "UDP"
)

// Port is one entry of a VMI interface's ports[].
type Port struct {
	Name     string
	Protocol Protocol // "" means TCP
	Port     uint16
}

// Migration ports used by live migration inside the pod; never forwarded.
const (
	MigrationPortFirst = 49152
	MigrationPortLast  = 49153
)

// DefaultVMNetworkCIDR is KubeVirt's default masquerade guest subnet.
const DefaultVMNetworkCIDR = "10.0.2.0/24"

// DefaultPodInterface is the pod's primary interface created by the CNI.
const DefaultPodInterface = "eth0"

// bridgeModeServerIP is put on the bridge in bridge binding (the pod IP has
// moved to the guest) so the DHCP server has an address to identify itself.
var bridgeModeServerIP = netip.MustParsePrefix("169.254.75.10/32")

// Input is what the caller knows about one VMI interface on the pod network.
// Everything in it comes from the VMI spec and the launcher pod; NewPlan turns
// it into a Plan without touching the host.
type Input struct {
	VMIUID        string  // used to derive a stable MAC when MAC is empty
	InterfaceName string  // spec.domain.devices.interfaces[].name
	Binding       Binding // Masquerade or Bridge
	MAC           string  // interfaces[].macAddress; "" = derived
	VMNetworkCIDR string  // networks[].pod.vmNetworkCIDR; "" = 10.0.2.0/24 (masquerade only)
	Ports         []Port  // interfaces[].ports; empty = forward all ports (masquerade only)
	PodInterface  string  // "" = eth0
	MTU           int     // 0 = the pod interface's MTU
	UID, GID      uint32  // owner of the tap: the user QEMU runs as
	Hostname      string  // handed to the guest by DHCP; "" = none
	DNS           DNS     // from the pod's resolv.conf (see ParseResolvConf)
}

// Plan is the desired network for one VMI interface. It is pure data: the
// same Input always yields the same Plan, so an agent that restarts finds
// what it built before.
type Plan struct {
	Binding      Binding
	PodInterface string
	Bridge       string // bridge in the pod netns
	Tap          string // tap QEMU opens with -netdev tap,ifname=Tap
	GuestMAC     net.HardwareAddr
	// Masquerade only: the guest and gateway addresses on the private subnet.
	Gateway netip.Prefix // e.g. 10.0.2.1/24, assigned to the bridge
	GuestIP netip.Prefix // e.g. 10.0.2.2/24, handed out by DHCP
	// Ports are the only ports forwarded by masquerade (nil = all but the
	// migration ports). Bridge binding does not filter (as in KubeVirt).
	Ports []Port
	MTU   int // 0 = take the pod interface's MTU
	UID   uint32
	GID   uint32
	// Hostname and DNS are handed to the guest by DHCP.
	Hostname string
	DNS      DNS
}

// Validation errors returned (wrapped) by NewPlan.
var (
	ErrInvalidInput = errors.New("invalid network input")
)

// NewPlan validates in and computes the Plan for it.
func NewPlan(in Input) (Plan, error) {
	if in.InterfaceName == "" {
		return Plan{}, fmt.Errorf("%w: interface name is empty", ErrInvalidInput)
	}
	p := Plan{
		Binding:      in.Binding,
		PodInterface: in.PodInterface,
		Bridge:       LinkName("nvbr", in.InterfaceName),
		Tap:          LinkName("nvtap", in.InterfaceName),
		MTU:          in.MTU,
		UID:          in.UID,
		GID:          in.GID,
		Hostname:     in.Hostname,
		DNS:          in.DNS,
	}
	if p.PodInterface == "" {
		p.PodInterface = DefaultPodInterface
	}
	if in.MTU < 0 || (in.MTU > 0 && in.MTU < 576) || in.MTU > 65535 {
		return Plan{}, fmt.Errorf("%w: interface %q: MTU %d out of range", ErrInvalidInput, in.InterfaceName, in.MTU)
	}
	mac, err := guestMAC(in)
	if err != nil {
		return Plan{}, err
	}
	p.GuestMAC = mac
	switch in.Binding {
	case Masquerade:
		if p.Gateway, p.GuestIP, err = masqueradeAddrs(in.VMNetworkCIDR); err != nil {
			return Plan{}, fmt.Errorf("interface %q: %w", in.InterfaceName, err)
		}
	case Bridge:
		if in.VMNetworkCIDR != "" {
			return Plan{}, fmt.Errorf("%w: interface %q: vmNetworkCIDR applies to masquerade only", ErrInvalidInput, in.InterfaceName)
		}
	default:
		return Plan{}, fmt.Errorf("%w: interface %q: unsupported binding %q", ErrInvalidInput, in.InterfaceName, in.Binding)
	}
	if p.Ports, err = normalizePorts(in.Ports); err != nil {
		return Plan{}, fmt.Errorf("interface %q: %w", in.InterfaceName, err)
	}
	return p, nil
}

// LinkName derives a deterministic interface name (at most 15 bytes, the
// kernel's IFNAMSIZ-1) from a prefix and the VMI interface name.
func LinkName(prefix, ifaceName string) string {
	sum := sha256.Sum256([]byte(ifaceName))
	name := prefix + hex.EncodeToString(sum[:])
	return name[:15]
}

func guestMAC(in Input) (net.HardwareAddr, error) {
	if in.MAC != "" {
		mac, err := net.ParseMAC(in.MAC)
		if err != nil || len(mac) != 6 {
			return nil, fmt.Errorf("%w: interface %q: bad MAC %q", ErrInvalidInput, in.InterfaceName, in.MAC)
		}
		if mac[0]&1 == 1 {
			return nil, fmt.Errorf("%w: interface %q: MAC %q is multicast", ErrInvalidInput, in.InterfaceName, in.MAC)
		}
		return mac, nil
	}
	sum := sha256.Sum256([]byte(in.VMIUID + "/" + in.InterfaceName))
	mac := net.HardwareAddr(sum[:6])
	mac[0] = mac[0]&0xfc | 0x02 // unicast, locally administered
	return mac, nil
}

// masqueradeAddrs returns the gateway (first host) and guest (second host)
// of cidr, both with cidr's prefix length.
func masqueradeAddrs(cidr string) (gw, guest netip.Prefix, err error) {
	if cidr == "" {
		cidr = DefaultVMNetworkCIDR
	}
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil {
		return gw, guest, fmt.Errorf("%w: vmNetworkCIDR %q: %v", ErrInvalidInput, cidr, err)
	}
	if !pfx.Addr().Is4() {
		return gw, guest, fmt.Errorf("%w: vmNetworkCIDR %q: only IPv4 is supported", ErrInvalidInput, cidr)
	}
	if pfx.Bits() > 30 {
		return gw, guest, fmt.Errorf("%w: vmNetworkCIDR %q: need at least /30", ErrInvalidInput, cidr)
	}
	base := pfx.Masked().Addr()
	g := base.Next()
	return netip.PrefixFrom(g, pfx.Bits()), netip.PrefixFrom(g.Next(), pfx.Bits()), nil
}

func normalizePorts(in []Port) ([]Port, error) {
	out := make([]Port, 0, len(in))
	seen := map[Port]bool{}
	for _, p := range in {
		proto := Protocol(strings.ToUpper(string(p.Protocol)))
		if proto == "" {
			proto = TCP
		}
		if proto != TCP && proto != UDP {
			return nil, fmt.Errorf("%w: port %q: protocol %q not supported", ErrInvalidInput, p.Name, p.Protocol)
		}
		if p.Port == 0 {
			return nil, fmt.Errorf("%w: port %q: port 0", ErrInvalidInput, p.Name)
		}
		if proto == TCP && p.Port >= MigrationPortFirst && p.Port <= MigrationPortLast {
			return nil, fmt.Errorf("%w: port %q: %d is reserved for migration", ErrInvalidInput, p.Name, p.Port)
		}
		key := Port{Protocol: proto, Port: p.Port}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, Port{Name: p.Name, Protocol: proto, Port: p.Port})
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}
