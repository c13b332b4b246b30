package netsetup

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseResolvConf(t *testing.T) {
	a := netip.MustParseAddr
	tests := []struct {
		name string
		in   string
		want DNS
	}{
		{name: "empty", in: "", want: DNS{}},
		{
			name: "kubernetes pod",
			in: "search default.svc.cluster.local svc.cluster.local cluster.local\n" +
				"nameserver 10.96.0.10\noptions ndots:5\n",
			want: DNS{Servers: []netip.Addr{a("10.96.0.10")}, Search: []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}},
		},
		{
			name: "comments, junk, v6, last search wins",
			in: "# generated\nnameserver 1.1.1.1 # primary\nnameserver fe80::1%eth0\nnameserver bogus\n" +
				"; old\nsearch a.example\ndomain b.example\nsearch c.example d.example\n",
			want: DNS{Servers: []netip.Addr{a("1.1.1.1"), a("fe80::1")}, Search: []string{"c.example", "d.example"}},
		},
		{name: "domain only", in: "domain corp.example\n", want: DNS{Search: []string{"corp.example"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResolvConf(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
				t.Errorf("ParseResolvConf mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDNS_IPv4Servers(t *testing.T) {
	d := DNS{Servers: []netip.Addr{netip.MustParseAddr("fd00::1"), netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("8.8.8.8")}}
	want := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("8.8.8.8")}
	if diff := cmp.Diff(want, d.IPv4Servers(), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("IPv4Servers mismatch (-want +got):\n%s", diff)
	}
}
