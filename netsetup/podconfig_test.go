package netsetup

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestPodConfig_RoundTrip(t *testing.T) {
	tests := []podConfig{
		{Addr: netip.MustParsePrefix("10.244.1.7/24"), Routes: []podRoute{
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: netip.MustParseAddr("10.244.1.1")},
		}},
		{Addr: netip.MustParsePrefix("10.244.1.7/32"), Routes: []podRoute{
			{Dst: netip.MustParsePrefix("169.254.1.1/32"), Scope: 253},
			{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: netip.MustParseAddr("169.254.1.1")},
		}},
		{Addr: netip.MustParsePrefix("192.168.0.2/16")},
	}
	opts := cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})
	for _, c := range tests {
		s, err := c.encode()
		if err != nil {
			t.Fatalf("encode(%+v): %v", c, err)
		}
		got, err := decodePodConfig(s)
		if err != nil {
			t.Fatalf("decode(%q): %v", s, err)
		}
		if diff := cmp.Diff(c, got, opts); diff != "" {
			t.Errorf("round trip of %q (-want +got):\n%s", s, diff)
		}
	}
}

func TestPodConfig_Gateway(t *testing.T) {
	c := podConfig{Routes: []podRoute{
		{Dst: netip.MustParsePrefix("169.254.1.1/32"), Scope: 253},
		{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: netip.MustParseAddr("169.254.1.1")},
	}}
	gw, ok := c.gateway()
	if !ok || gw != netip.MustParseAddr("169.254.1.1") {
		t.Errorf("gateway() = %v, %v", gw, ok)
	}
	if _, ok := (podConfig{}).gateway(); ok {
		t.Error("gateway() of empty config reported one")
	}
}

func TestDecodePodConfig_Rejects(t *testing.T) {
	for _, s := range []string{"", "someone else's alias", "nodevirt1", "nodevirt1 addr=x", "nodevirt1 addr=10.0.0.1/8 route=1,2",
		"nodevirt1 addr=10.0.0.1/8 color=red", "nodevirt1 addr=10.0.0.1/8 route=0.0.0.0/0,-,999"} {
		if _, err := decodePodConfig(s); err == nil {
			t.Errorf("decodePodConfig(%q) succeeded", s)
		}
	}
}

func TestPodConfig_EncodeTooLong(t *testing.T) {
	c := podConfig{Addr: netip.MustParsePrefix("10.0.0.2/24")}
	for range 20 {
		c.Routes = append(c.Routes, podRoute{Dst: netip.MustParsePrefix("192.168.100.0/24"), Gw: netip.MustParseAddr("10.0.0.1")})
	}
	if s, err := c.encode(); err == nil {
		t.Errorf("encode() = %q (%d bytes), want error", s, len(s))
	}
}
