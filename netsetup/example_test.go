package netsetup_test

import (
	"fmt"
	"strings"

	"github.com/nodevirt/nodevirt/netsetup"
)

func ExampleNewPlan() {
	dns, _ := netsetup.ParseResolvConf(strings.NewReader("search default.svc.cluster.local\nnameserver 10.96.0.10\n"))
	plan, err := netsetup.NewPlan(netsetup.Input{
		VMIUID:        "6a1c1c0e-0000-4000-8000-000000000001",
		InterfaceName: "default",
		Binding:       netsetup.Masquerade,
		MAC:           "02:00:00:00:00:01",
		Ports:         []netsetup.Port{{Name: "http", Port: 80}},
		UID:           107,
		GID:           107,
		Hostname:      "vm1",
		DNS:           dns,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("bridge:", plan.Bridge, "tap:", plan.Tap)
	fmt.Println("guest:", plan.GuestIP, "gateway:", plan.Gateway, "mac:", plan.GuestMAC)
	fmt.Println("qemu: -netdev tap,id=net0,ifname=" + plan.Tap + ",script=no,downscript=no")
	// Output:
	// bridge: nvbr37a8eec1ce1 tap: nvtap37a8eec1ce
	// guest: 10.0.2.2/24 gateway: 10.0.2.1/24 mac: 02:00:00:00:00:01
	// qemu: -netdev tap,id=net0,ifname=nvtap37a8eec1ce,script=no,downscript=no
}
