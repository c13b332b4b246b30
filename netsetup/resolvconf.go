package netsetup

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// DNS is the resolver configuration handed to the guest.
type DNS struct {
	Servers []netip.Addr // IPv4 only are handed out by DHCPv4
	Search  []string
}

// ParseResolvConf reads the nameserver and search (or domain) lines of a
// resolv.conf. The last search/domain line wins, as in the C resolver.
// IPv6 nameservers are kept but DHCPv4 cannot carry them.
func ParseResolvConf(r io.Reader) (DNS, error) {
	var d DNS
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			a, err := netip.ParseAddr(f[1])
			if err != nil {
				continue // tolerate junk like the C resolver does
			}
			d.Servers = append(d.Servers, a.WithZone(""))
		case "search":
			d.Search = append([]string(nil), f[1:]...)
		case "domain":
			d.Search = []string{f[1]}
		}
	}
	if err := sc.Err(); err != nil {
		return DNS{}, fmt.Errorf("read resolv.conf: %w", err)
	}
	return d, nil
}

// IPv4Servers returns the IPv4 nameservers.
func (d DNS) IPv4Servers() []netip.Addr {
	var out []netip.Addr
	for _, a := range d.Servers {
		if a.Is4() || a.Is4In6() {
			out = append(out, a.Unmap())
		}
	}
	return out
}
