package netsetup

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

func testLease() Lease {
	mac, _ := net.ParseMAC("02:aa:bb:cc:dd:ee")
	return Lease{
		Interface: "nvbr0",
		ServerIP:  netip.MustParseAddr("10.0.2.1"),
		ClientMAC: mac,
		ClientIP:  netip.MustParsePrefix("10.0.2.2/24"),
		Router:    netip.MustParseAddr("10.0.2.1"),
		DNS:       []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		Search:    []string{"default.svc.cluster.local", "cluster.local"},
		Hostname:  "vm1",
		MTU:       1450,
	}
}

// summary is the part of a reply the tests compare.
type summary struct {
	Type     string
	YourIP   string
	ServerID string
	Mask     string
	Router   string
	DNS      string
	Search   string
	Hostname string
	MTU      []byte
	Lease    []byte
}

func summarize(m *dhcpv4.DHCPv4) summary {
	s := summary{
		Type:     m.MessageType().String(),
		YourIP:   m.YourIPAddr.String(),
		ServerID: m.ServerIdentifier().String(),
		Hostname: m.HostName(),
		MTU:      m.Options.Get(dhcpv4.OptionInterfaceMTU),
		Lease:    m.Options.Get(dhcpv4.OptionIPAddressLeaseTime),
	}
	if mask := m.SubnetMask(); mask != nil {
		s.Mask = net.IP(mask).String()
	}
	if r := m.Router(); len(r) > 0 {
		s.Router = r[0].String()
	}
	if d := m.DNS(); len(d) > 0 {
		s.DNS = d[0].String()
	}
	if l := m.DomainSearch(); l != nil {
		s.Search = strings.Join(l.Labels, ",")
	}
	return s
}

func TestLease_Reply(t *testing.T) {
	l := testLease()
	other, _ := net.ParseMAC("02:00:00:00:00:99")
	discover, _ := dhcpv4.NewDiscovery(l.ClientMAC)
	otherDiscover, _ := dhcpv4.NewDiscovery(other)
	request := func(ip string, sid string) *dhcpv4.DHCPv4 {
		mods := []dhcpv4.Modifier{dhcpv4.WithHwAddr(l.ClientMAC), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP(ip)))}
		if sid != "" {
			mods = append(mods, dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(sid))))
		}
		m, err := dhcpv4.New(mods...)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	renew, _ := dhcpv4.New(dhcpv4.WithHwAddr(l.ClientMAC), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithClientIP(net.ParseIP("10.0.2.2")))
	release, _ := dhcpv4.New(dhcpv4.WithHwAddr(l.ClientMAC), dhcpv4.WithMessageType(dhcpv4.MessageTypeRelease))
	full := summary{YourIP: "10.0.2.2", ServerID: "10.0.2.1", Mask: "255.255.255.0", Router: "10.0.2.1", DNS: "10.96.0.10",
		Search: "default.svc.cluster.local,cluster.local", Hostname: "vm1", MTU: []byte{0x05, 0xaa}, Lease: []byte{0xff, 0xff, 0xff, 0xff}}
	with := func(typ string) summary { s := full; s.Type = typ; return s }

	tests := []struct {
		name   string
		req    *dhcpv4.DHCPv4
		wantOK bool
		want   summary
	}{
		{name: "discover gets offer", req: discover, wantOK: true, want: with("OFFER")},
		{name: "request for our IP gets ack", req: request("10.0.2.2", "10.0.2.1"), wantOK: true, want: with("ACK")},
		{name: "renew by ciaddr gets ack", req: renew, wantOK: true, want: with("ACK")},
		{name: "request for another IP gets nak", req: request("10.0.2.9", ""), wantOK: true,
			want: summary{Type: "NAK", YourIP: "0.0.0.0", ServerID: "10.0.2.1"}},
		{name: "request to another server is ignored", req: request("10.0.2.2", "10.9.9.9")},
		{name: "other MAC is ignored", req: otherDiscover},
		{name: "release is ignored", req: release},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, ok, err := l.reply(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.wantOK {
				t.Fatalf("reply() ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if resp.TransactionID != tt.req.TransactionID {
				t.Errorf("xid %v, want %v", resp.TransactionID, tt.req.TransactionID)
			}
			if diff := cmp.Diff(tt.want, summarize(resp)); diff != "" {
				t.Errorf("reply mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResult_Lease(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:01")
	dns := DNS{Servers: []netip.Addr{netip.MustParseAddr("fd00::10"), netip.MustParseAddr("10.96.0.10")}, Search: []string{"cluster.local"}}
	masq := Result{Binding: Masquerade, Bridge: "br", GuestMAC: mac, GuestIP: netip.MustParsePrefix("10.0.2.2/24"),
		Gateway: netip.MustParseAddr("10.0.2.1"), MTU: 1500, DNS: dns, Hostname: "h"}
	bridge := Result{Binding: Bridge, Bridge: "br", GuestMAC: mac, GuestIP: netip.MustParsePrefix("10.244.0.7/24"),
		Gateway: netip.MustParseAddr("10.244.0.1"), MTU: 1450, DNS: dns}
	tests := []struct {
		name string
		r    Result
		want Lease
	}{
		{"masquerade", masq, Lease{Interface: "br", ServerIP: netip.MustParseAddr("10.0.2.1"), ClientMAC: mac,
			ClientIP: netip.MustParsePrefix("10.0.2.2/24"), Router: netip.MustParseAddr("10.0.2.1"),
			DNS: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, Search: []string{"cluster.local"}, Hostname: "h", MTU: 1500}},
		{"bridge", bridge, Lease{Interface: "br", ServerIP: netip.MustParseAddr("169.254.75.10"), ClientMAC: mac,
			ClientIP: netip.MustParsePrefix("10.244.0.7/24"), Router: netip.MustParseAddr("10.244.0.1"),
			DNS: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, Search: []string{"cluster.local"}, MTU: 1450}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.r.Lease(), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("Lease() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
