package metrics

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TapCounters reads the counters of the tap devices named in taps (VMI
// interface name → tap name) in the network namespace at nsPath, with one
// rtnetlink socket opened in that namespace (the calling goroutine never
// enters it; naming the family keeps netlink from opening an XFRM and a
// netfilter socket as well, which doubled the cost per VM and scrape). The
// counters are turned to the guest's view: the tap transmits what the
// guest receives.
func TapCounters(nsPath string, taps map[string]string) ([]Interface, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", nsPath, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", nsPath, err)
	}
	defer h.Close()
	var out []Interface
	var errs []error
	for name, tap := range taps {
		l, err := h.LinkByName(tap)
		if err != nil {
			errs = append(errs, fmt.Errorf("tap %q in %s: %w", tap, nsPath, err))
			continue
		}
		s := l.Attrs().Statistics
		if s == nil {
			continue
		}
		out = append(out, Interface{
			Name:    name,
			RxBytes: s.TxBytes, RxPackets: s.TxPackets, RxErrors: s.TxErrors, RxDropped: s.TxDropped,
			TxBytes: s.RxBytes, TxPackets: s.RxPackets, TxErrors: s.RxErrors, TxDropped: s.RxDropped,
		})
	}
	return out, errors.Join(errs...)
}
