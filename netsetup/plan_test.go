package netsetup

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestNewPlan(t *testing.T) {
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	pfx := netip.MustParsePrefix
	tests := []struct {
		name    string
		in      Input
		want    Plan
		wantErr error
	}{
		{
			name: "masquerade defaults",
			in:   Input{VMIUID: "u1", InterfaceName: "default", Binding: Masquerade, MAC: "02:00:00:00:00:01", UID: 107, GID: 107},
			want: Plan{Binding: Masquerade, PodInterface: "eth0", Bridge: LinkName("nvbr", "default"), Tap: LinkName("nvtap", "default"),
				GuestMAC: mac("02:00:00:00:00:01"), Gateway: pfx("10.0.2.1/24"), GuestIP: pfx("10.0.2.2/24"), UID: 107, GID: 107},
		},
		{
			name: "masquerade custom CIDR and ports",
			in: Input{InterfaceName: "net1", Binding: Masquerade, MAC: "02:00:00:00:00:02", VMNetworkCIDR: "10.11.12.0/28",
				Ports: []Port{{Name: "http", Port: 80}, {Protocol: "udp", Port: 53}, {Protocol: "TCP", Port: 80}}},
			want: Plan{Binding: Masquerade, PodInterface: "eth0", Bridge: LinkName("nvbr", "net1"), Tap: LinkName("nvtap", "net1"),
				GuestMAC: mac("02:00:00:00:00:02"), Gateway: pfx("10.11.12.1/28"), GuestIP: pfx("10.11.12.2/28"),
				Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}, {Protocol: UDP, Port: 53}}},
		},
		{
			name: "bridge",
			in:   Input{InterfaceName: "default", Binding: Bridge, MAC: "02:00:00:00:00:03", MTU: 1400, Hostname: "vm1"},
			want: Plan{Binding: Bridge, PodInterface: "eth0", Bridge: LinkName("nvbr", "default"), Tap: LinkName("nvtap", "default"),
				GuestMAC: mac("02:00:00:00:00:03"), MTU: 1400, Hostname: "vm1"},
		},
		{name: "no name", in: Input{Binding: Masquerade}, wantErr: ErrInvalidInput},
		{name: "bad binding", in: Input{InterfaceName: "a", Binding: "slirp"}, wantErr: ErrInvalidInput},
		{name: "bad MAC", in: Input{InterfaceName: "a", Binding: Bridge, MAC: "zz"}, wantErr: ErrInvalidInput},
		{name: "multicast MAC", in: Input{InterfaceName: "a", Binding: Bridge, MAC: "01:00:00:00:00:01"}, wantErr: ErrInvalidInput},
		{name: "IPv6 CIDR", in: Input{InterfaceName: "a", Binding: Masquerade, VMNetworkCIDR: "fd10::/64"}, wantErr: ErrInvalidInput},
		{name: "CIDR too small", in: Input{InterfaceName: "a", Binding: Masquerade, VMNetworkCIDR: "10.0.0.0/31"}, wantErr: ErrInvalidInput},
		{name: "CIDR on bridge", in: Input{InterfaceName: "a", Binding: Bridge, VMNetworkCIDR: "10.0.0.0/24"}, wantErr: ErrInvalidInput},
		{name: "migration port", in: Input{InterfaceName: "a", Binding: Masquerade, Ports: []Port{{Port: 49152}}}, wantErr: ErrInvalidInput},
		{name: "SCTP", in: Input{InterfaceName: "a", Binding: Masquerade, Ports: []Port{{Protocol: "SCTP", Port: 1}}}, wantErr: ErrInvalidInput},
		{name: "port 0", in: Input{InterfaceName: "a", Binding: Masquerade, Ports: []Port{{Port: 0}}}, wantErr: ErrInvalidInput},
		{name: "MTU too small", in: Input{InterfaceName: "a", Binding: Bridge, MTU: 100}, wantErr: ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewPlan(tt.in)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("NewPlan() error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
				t.Errorf("NewPlan() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewPlan_DerivedMACIsStableAndLocal(t *testing.T) {
	in := Input{VMIUID: "3f2a", InterfaceName: "default", Binding: Masquerade}
	a, err := NewPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewPlan(in)
	if a.GuestMAC.String() != b.GuestMAC.String() {
		t.Errorf("derived MAC not stable: %s vs %s", a.GuestMAC, b.GuestMAC)
	}
	if a.GuestMAC[0]&0x03 != 0x02 {
		t.Errorf("derived MAC %s is not unicast+locally administered", a.GuestMAC)
	}
	in.VMIUID = "other"
	c, _ := NewPlan(in)
	if c.GuestMAC.String() == a.GuestMAC.String() {
		t.Errorf("different VMIs got the same MAC %s", a.GuestMAC)
	}
}

func TestLinkName(t *testing.T) {
	names := map[string]bool{}
	for _, iface := range []string{"default", "eth0", "a-very-long-interface-name-beyond-ifnamsiz", ""} {
		for _, prefix := range []string{"nvbr", "nvtap"} {
			n := LinkName(prefix, iface)
			if len(n) > 15 {
				t.Errorf("LinkName(%q, %q) = %q, longer than 15", prefix, iface, n)
			}
			if n != LinkName(prefix, iface) {
				t.Errorf("LinkName(%q, %q) not deterministic", prefix, iface)
			}
			if names[n] {
				t.Errorf("LinkName(%q, %q) = %q collides", prefix, iface, n)
			}
			names[n] = true
		}
	}
}

func TestBinding_LiveMigratable(t *testing.T) {
	if !Masquerade.LiveMigratable() || Bridge.LiveMigratable() {
		t.Errorf("LiveMigratable: masquerade=%v bridge=%v, want true/false", Masquerade.LiveMigratable(), Bridge.LiveMigratable())
	}
}
