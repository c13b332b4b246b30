package netsetup

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// podConfig is the IPv4 configuration of the pod interface that bridge
// binding moves to the guest. It is recorded on the bridge's interface alias
// (IFLA_IFALIAS) before the pod interface is stripped, so the netns itself
// remembers it: a re-run after a crash and Release both read it from there.
type podConfig struct {
	Addr   netip.Prefix // the pod IP and prefix
	Routes []podRoute   // routes via the pod interface, except the connected one
}

type podRoute struct {
	Dst   netip.Prefix
	Gw    netip.Addr // invalid for a link-scope route
	Scope uint8
}

// aliasMagic starts every alias written by this package (format version 1).
const aliasMagic = "nodevirt1"

// maxAlias is IFALIASZ-1.
const maxAlias = 255

// gateway returns the default route's gateway, if any.
func (c podConfig) gateway() (netip.Addr, bool) {
	for _, r := range c.Routes {
		if r.Dst.Bits() == 0 && r.Gw.IsValid() {
			return r.Gw, true
		}
	}
	return netip.Addr{}, false
}

// encode renders c as "nodevirt1 addr=A/N route=DST,GW,SCOPE ...".
func (c podConfig) encode() (string, error) {
	var b strings.Builder
	b.WriteString(aliasMagic)
	b.WriteString(" addr=" + c.Addr.String())
	for _, r := range c.Routes {
		gw := "-"
		if r.Gw.IsValid() {
			gw = r.Gw.String()
		}
		fmt.Fprintf(&b, " route=%s,%s,%d", r.Dst, gw, r.Scope)
	}
	if b.Len() > maxAlias {
		return "", fmt.Errorf("pod interface config %q does not fit an interface alias (%d > %d bytes)", b.String(), b.Len(), maxAlias)
	}
	return b.String(), nil
}

// decodePodConfig parses what encode wrote.
func decodePodConfig(s string) (podConfig, error) {
	f := strings.Fields(s)
	if len(f) == 0 || f[0] != aliasMagic {
		return podConfig{}, fmt.Errorf("alias %q: not written by nodevirt", s)
	}
	var c podConfig
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "addr":
			p, err := netip.ParsePrefix(v)
			if err != nil {
				return podConfig{}, fmt.Errorf("alias %q: addr: %w", s, err)
			}
			c.Addr = p
		case "route":
			r, err := decodeRoute(v)
			if err != nil {
				return podConfig{}, fmt.Errorf("alias %q: %w", s, err)
			}
			c.Routes = append(c.Routes, r)
		default:
			return podConfig{}, fmt.Errorf("alias %q: unknown key %q", s, k)
		}
	}
	if !c.Addr.IsValid() {
		return podConfig{}, fmt.Errorf("alias %q: no addr", s)
	}
	return c, nil
}

func decodeRoute(v string) (podRoute, error) {
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return podRoute{}, fmt.Errorf("route %q: want DST,GW,SCOPE", v)
	}
	dst, err := netip.ParsePrefix(parts[0])
	if err != nil {
		return podRoute{}, fmt.Errorf("route %q: %w", v, err)
	}
	r := podRoute{Dst: dst}
	if parts[1] != "-" {
		if r.Gw, err = netip.ParseAddr(parts[1]); err != nil {
			return podRoute{}, fmt.Errorf("route %q: %w", v, err)
		}
	}
	scope, err := strconv.ParseUint(parts[2], 10, 8)
	if err != nil {
		return podRoute{}, fmt.Errorf("route %q: scope: %w", v, err)
	}
	r.Scope = uint8(scope)
	return r, nil
}
