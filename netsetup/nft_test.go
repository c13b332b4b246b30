package netsetup

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNATRules_Specs(t *testing.T) {
	base := natRules{podIface: "eth0", podIP: netip.MustParseAddr("10.244.0.7"), guestIP: netip.MustParseAddr("10.0.2.2")}
	withPorts := base
	withPorts.ports = []Port{{Protocol: TCP, Port: 80}, {Protocol: UDP, Port: 53}}
	tests := []struct {
		name string
		n    natRules
		want []string
	}{
		{"all ports", base, []string{
			"prerouting: iif eth0 daddr 10.244.0.7 tcp dport 49152-49153 return",
			"prerouting: iif eth0 daddr 10.244.0.7 dnat to 10.0.2.2",
			"postrouting: saddr 10.0.2.2 oif eth0 masquerade",
		}},
		{"declared ports", withPorts, []string{
			"prerouting: iif eth0 daddr 10.244.0.7 tcp dport 49152-49153 return",
			"prerouting: iif eth0 daddr 10.244.0.7 TCP dport 80 dnat to 10.0.2.2",
			"prerouting: iif eth0 daddr 10.244.0.7 UDP dport 53 dnat to 10.0.2.2",
			"postrouting: saddr 10.0.2.2 oif eth0 masquerade",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range tt.n.specs() {
				got = append(got, s.chain+": "+s.desc)
				if len(s.exprs) == 0 {
					t.Errorf("rule %q has no expressions", s.desc)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("specs mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if bytes.Equal(base.fingerprint(), withPorts.fingerprint()) {
		t.Error("different rulesets share a fingerprint")
	}
	if !bytes.Equal(base.fingerprint(), base.fingerprint()) {
		t.Error("fingerprint not deterministic")
	}
}
