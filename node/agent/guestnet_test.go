package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/qmp"
)

func guestIf(name, mac string, addrs ...string) qmp.NetworkInterface {
	gi := qmp.NetworkInterface{Name: name, HardwareAddress: mac}
	for _, a := range addrs {
		gi.IPAddresses = append(gi.IPAddresses, struct {
			Type    string `json:"ip-address-type"`
			Address string `json:"ip-address"`
			Prefix  int    `json:"prefix"`
		}{Type: "ipv4", Address: a, Prefix: 24})
	}
	return gi
}

func TestMergeGuestNet(t *testing.T) {
	dom := func(name, mac string, ips ...string) v1.VirtualMachineInstanceNetworkInterface {
		i := v1.VirtualMachineInstanceNetworkInterface{Name: name, MAC: mac, InterfaceName: "eth0", InfoSource: "domain", IPAddresses: ips}
		if len(ips) > 0 {
			i.IPAddress = ips[0]
		}
		return i
	}
	both := func(i v1.VirtualMachineInstanceNetworkInterface, guestName string, ips ...string) v1.VirtualMachineInstanceNetworkInterface {
		i.InterfaceName, i.InfoSource = guestName, infoSourceBoth
		i.IPAddresses = append(append([]string(nil), i.IPAddresses...), ips...)
		if i.IPAddress == "" && len(i.IPAddresses) > 0 {
			i.IPAddress = i.IPAddresses[0]
		}
		return i
	}
	lo := guestIf("lo", "00:00:00:00:00:00", "127.0.0.1")
	tests := []struct {
		name   string
		domain []v1.VirtualMachineInstanceNetworkInterface
		guest  guestNet
		masq   map[string]bool
		cur    []v1.VirtualMachineInstanceNetworkInterface
		want   []v1.VirtualMachineInstanceNetworkInterface
	}{{
		name: "no interfaces",
	}, {
		name:   "bridge: guest addresses added, link-local and loopback not",
		domain: []v1.VirtualMachineInstanceNetworkInterface{dom("default", "02:00:00:00:00:01", "10.244.0.5")},
		guest: guestNet{Known: true, Interfaces: []qmp.NetworkInterface{lo,
			guestIf("enp1s0", "02:00:00:00:00:01", "10.244.0.5", "fe80::1", "2001:db8::5")}},
		want: []v1.VirtualMachineInstanceNetworkInterface{both(dom("default", "02:00:00:00:00:01", "10.244.0.5"), "enp1s0", "2001:db8::5")},
	}, {
		name:   "masquerade: the pod IP stays, the guest's private address is not reported",
		domain: []v1.VirtualMachineInstanceNetworkInterface{dom("default", "02:00:00:00:00:01", "10.244.0.5")},
		guest:  guestNet{Known: true, Interfaces: []qmp.NetworkInterface{guestIf("eth0", "02:00:00:00:00:01", "10.0.2.2")}},
		masq:   map[string]bool{"default": true},
		want:   []v1.VirtualMachineInstanceNetworkInterface{both(dom("default", "02:00:00:00:00:01", "10.244.0.5"), "eth0")},
	}, {
		name:   "MAC unknown to the guest: domain view only",
		domain: []v1.VirtualMachineInstanceNetworkInterface{dom("default", "02:00:00:00:00:01")},
		guest:  guestNet{Known: true, Interfaces: []qmp.NetworkInterface{lo}},
		want:   []v1.VirtualMachineInstanceNetworkInterface{dom("default", "02:00:00:00:00:01")},
	}, {
		name:   "guest not asked yet (agent restart): keep the status's guest part",
		domain: []v1.VirtualMachineInstanceNetworkInterface{dom("default", "02:00:00:00:00:01", "10.244.0.5")},
		cur:    []v1.VirtualMachineInstanceNetworkInterface{both(dom("default", "02:00:00:00:00:01", "10.244.0.5"), "enp1s0", "2001:db8::5")},
		want:   []v1.VirtualMachineInstanceNetworkInterface{both(dom("default", "02:00:00:00:00:01", "10.244.0.5"), "enp1s0", "2001:db8::5")},
	}, {
		name:   "masquerade, guest not asked yet after a migration: the new pod IP, the guest's name kept",
		domain: []v1.VirtualMachineInstanceNetworkInterface{dom("default", "02:00:00:00:00:01", "10.244.1.7")},
		masq:   map[string]bool{"default": true},
		cur:    []v1.VirtualMachineInstanceNetworkInterface{both(dom("default", "02:00:00:00:00:01", "10.244.0.5"), "eth0")},
		want:   []v1.VirtualMachineInstanceNetworkInterface{both(dom("default", "02:00:00:00:00:01", "10.244.1.7"), "eth0")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mergeGuestNet(tt.domain, tt.guest, tt.masq, tt.cur)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mergeGuestNet (-want +got):\n%s", diff)
			}
		})
	}
}
