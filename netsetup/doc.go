// Package netsetup builds a VM's pod-network plumbing inside the launcher
// pod's network namespace: a bridge, a tap for QEMU, NAT rules
// (masquerade) or the move of the pod IP to the guest (bridge), and the DHCP
// server that hands the guest its configuration. It imports nothing of
// nodevirt; the agent calls it.
//
// # API
//
//	plan, err := netsetup.NewPlan(netsetup.Input{...}) // pure, table-tested
//	res, err := netsetup.Ensure(ctx, "/proc/<pid>/ns/net", plan)
//	srv, err := netsetup.ListenDHCP(ctx, nsPath, res.Lease(), log)
//	go srv.Serve(ctx)                                  // one per VMI interface
//	...
//	err = netsetup.Release(ctx, nsPath, plan)
//
// QEMU then gets "-netdev tap,id=…,ifname=<plan.Tap>,script=no,downscript=no
// -device virtio-net-pci,netdev=…,mac=<plan.GuestMAC>" and must run inside
// the same netns (the launcher does: it is the pod's container).
//
// # Masquerade (KubeVirt's recommended binding)
//
//	pod netns
//	  guest 10.0.2.2/24, gw 10.0.2.1      (QEMU, virtio-net, plan.GuestMAC)
//	      |
//	  tap nvtap<hash>                     (persistent, owner uid:gid)
//	      | bridge port
//	  bridge nvbr<hash> 10.0.2.1/24       (ip_forward=1, routes between)
//	      :
//	  eth0 <podIP>                        (from the CNI, untouched)
//	      |
//	  pod network
//
//	nftables table ip nodevirt
//	  chain prerouting  (nat, dstnat):
//	    iif eth0 daddr <podIP> tcp dport 49152-49153 return   (migration)
//	    iif eth0 daddr <podIP> [tcp|udp dport P] dnat to 10.0.2.2
//	                      (one rule per ports[] entry, or one for all ports)
//	  chain postrouting (nat, srcnat):
//	    saddr 10.0.2.2 oif eth0 masquerade
//
// The bridge gets the first host of vmNetworkCIDR (default 10.0.2.0/24), the
// guest the second. MTU of bridge, tap and the DHCP MTU option = the pod
// interface's MTU unless the plan overrides it.
//
// # Bridge
//
//	pod netns
//	  guest <podIP>/<prefix>, gw = the pod's gateway   (QEMU)
//	      |
//	  tap nvtap<hash> ---+
//	                     bridge nvbr<hash> 169.254.75.10/32, alias = record of eth0
//	  eth0 --------------+   (no IPv4 address, no routes)
//	      |
//	  pod network
//
// The pod interface's IPv4 address and its non-connected routes move to the
// guest: the guest gets the pod IP, prefix and default gateway by DHCP.
// Before eth0 is stripped, its configuration is recorded on the bridge's
// interface alias ("nodevirt1 addr=… route=…"), so the netns itself
// remembers it: a re-run after a crash reads it back, and Release restores
// eth0's address and routes before it deletes the bridge. The bridge's
// link-local 169.254.75.10/32 exists only so the DHCP server has a server
// identifier. ports[] is not enforced for bridge binding (as in KubeVirt:
// every port of the pod IP reaches the guest). A VMI with a bridge-bound pod
// interface cannot live-migrate: the agent reports LiveMigratable=False with
// reason ReasonInterfaceNotLiveMigratable ("InterfaceNotLiveMigratable")
// when Binding.LiveMigratable returns false. eth0 keeps its MAC; the guest
// uses plan.GuestMAC (from macAddress, else derived from VMI UID and
// interface name), so the pod network sees a second MAC behind the pod's veth.
//
// # Names and idempotency
//
// Link names are derived from the VMI interface name: "nvbr"/"nvtap" plus
// hex of its SHA-256, cut to 15 bytes (IFNAMSIZ-1). The same Input always
// gives the same Plan, so a restarted agent finds what it built. Each pod
// has its own netns, so names need not be unique across VMIs.
//
// Ensure runs an ordered list of named steps (see steps.go), each of which
// observes before it acts, treats "exists" as success and re-reads after
// creating. A crash between any two steps leaves a state from which the next
// Ensure converges to the same result; Result.Changed lists the steps that
// modified anything, and is empty on a converged netns. The nftables table
// is replaced atomically (one batch: add, delete, re-create) when its rules'
// fingerprint (stored as rule user data) differs from the plan's. Release
// deletes the table, the tap and the bridge (restoring eth0 first for bridge
// binding); "not found" is success, and a netns that no longer exists is
// released. Netlink dumps interrupted by concurrent changes
// (netlink.ErrDumpInterrupted) are retried. net.ipv4.ip_forward stays 1
// after Release: the netns dies with the pod.
//
// The tap is persistent, created by root with TUNSETOWNER/TUNSETGROUP set to
// the QEMU user (uid 107 in the launcher), so QEMU opens it without
// CAP_NET_ADMIN. It is single-queue: a tap created with IFF_MULTI_QUEUE
// refuses a QEMU attaching with queues=1 and vice versa, so multiqueue would
// have to be decided here and in the QEMU command line together (not done).
// IFF_VNET_HDR is set at creation but is per file descriptor: QEMU sets its
// own when it attaches (needed for offloads; vhost-net is absent on the dev
// machines).
//
// # DHCP: where it runs and why
//
// The DHCP server runs in the agent, one goroutine per VMI interface, not in
// the launcher. The launcher has a ≤ 10 MiB RSS budget and must stay a dumb
// QEMU parent; the agent already holds the plan and the lease. ListenDHCP
// opens a UDP :67 socket bound (SO_BINDTODEVICE) to the bridge while the
// calling thread is switched into the pod netns; a socket stays in the netns
// it was created in, so Serve then runs on any goroutine and the agent's
// own netns is never changed. It answers only the guest's MAC, always
// broadcasts its replies, and hands out address, netmask, router, DNS
// servers and search domains (parsed from the pod's resolv.conf with
// ParseResolvConf), hostname and MTU with an infinite lease (0xffffffff), so
// the guest never needs the server again after boot. Serve returns when its
// ctx is cancelled. After an agent restart the agent simply calls Ensure and
// ListenDHCP again: opening the socket takes milliseconds, well under the
// one-second budget, and SO_REUSEADDR/SO_REUSEPORT let it bind even if an
// old socket lingers.
//
// # Concurrency
//
// The agent's own netns is never changed: a thread is switched into the pod
// netns, locked to its goroutine, and switched back. Ensure does that once
// to open its sockets and /proc/sys files there (podsockets.go; they keep
// the netns) and runs its steps on the caller's goroutine, entering again
// only to create a tap. Release runs on the switched thread throughout.
// Calls for different netns may run concurrently; calls for the same plan
// must be serialised by the caller (the agent's per-VMI queue key does
// that).
//
// # IPv6: what is missing
//
// Only IPv4 is built. Missing: an IPv6 guest address for masquerade (KubeVirt
// uses fd10:0:2::2/120 with NAT66 in an ip6/inet table), DHCPv6 or router
// advertisements to configure it, moving the pod's global IPv6 addresses and
// routes to the guest in bridge binding (they stay on eth0, and IPv6 link
// local addresses appear on the bridge and tap), IPv6 nameservers (DHCPv4
// cannot carry them; ParseResolvConf keeps them, Lease drops them), and
// IPv6 DNAT of ports[]. vmNetworkCIDR must be IPv4. Also missing for IPv4:
// classless static routes (option 121) for pods whose gateway is outside
// their subnet (e.g. /32 pod addresses with a link-scope gateway route): the
// record keeps those routes and Release restores them, but the guest only
// gets the default router; and DNAT of connections from the pod itself to
// 127.0.0.1 (KubeVirt's output-chain rule).
package netsetup
