package netsetup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// TableName is the nftables table (family ip) that holds every rule this
// package installs in a pod netns. Release deletes it as a whole.
const TableName = "nodevirt"

const (
	chainPrerouting  = "prerouting"
	chainPostrouting = "postrouting"
)

// natRules is the desired masquerade ruleset, independent of any
// connection: pure, so it can be compared and tested.
type natRules struct {
	podIface string
	podIP    netip.Addr
	guestIP  netip.Addr
	ports    []Port
}

// ruleSpec is one rule: the chain it goes to, a human description (used for
// the fingerprint and in tests) and its expressions.
type ruleSpec struct {
	chain string
	desc  string
	exprs []expr.Any
}

func (n natRules) specs() []ruleSpec {
	var out []ruleSpec
	inbound := func(desc string, tail ...expr.Any) ruleSpec {
		e := append(matchIIF(n.podIface), matchIPDst(n.podIP)...)
		return ruleSpec{chain: chainPrerouting, desc: fmt.Sprintf("iif %s daddr %s %s", n.podIface, n.podIP, desc), exprs: append(e, tail...)}
	}
	out = append(out, inbound(fmt.Sprintf("tcp dport %d-%d return", MigrationPortFirst, MigrationPortLast),
		append(matchDportRange(unix.IPPROTO_TCP, MigrationPortFirst, MigrationPortLast), &expr.Verdict{Kind: expr.VerdictReturn})...))
	if len(n.ports) == 0 {
		out = append(out, inbound("dnat to "+n.guestIP.String(), dnatTo(n.guestIP)...))
	} else {
		for _, p := range n.ports {
			proto := byte(unix.IPPROTO_TCP)
			if p.Protocol == UDP {
				proto = unix.IPPROTO_UDP
			}
			e := append(matchDport(proto, p.Port), dnatTo(n.guestIP)...)
			out = append(out, inbound(fmt.Sprintf("%s dport %d dnat to %s", p.Protocol, p.Port, n.guestIP), e...))
		}
	}
	snat := append(matchIPSrc(n.guestIP), matchOIF(n.podIface)...)
	snat = append(snat, &expr.Masq{})
	out = append(out, ruleSpec{chain: chainPostrouting, desc: fmt.Sprintf("saddr %s oif %s masquerade", n.guestIP, n.podIface), exprs: snat})
	return out
}

// fingerprint identifies the whole ruleset; it is stored as every rule's
// user data so Ensure can tell "already converged" from "stale" cheaply.
func (n natRules) fingerprint() []byte {
	h := sha256.New()
	for _, s := range n.specs() {
		fmt.Fprintf(h, "%s: %s\n", s.chain, s.desc)
	}
	return append([]byte("nodevirt1:"), h.Sum(nil)[:16]...)
}

func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

func matchIIF(name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

func matchOIF(name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

func matchIPDst(a netip.Addr) []expr.Any { return matchIPField(16, a) }
func matchIPSrc(a netip.Addr) []expr.Any { return matchIPField(12, a) }

func matchIPField(offset uint32, a netip.Addr) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()},
	}
}

func matchL4(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
}

func dportPayload() expr.Any {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}
}

func matchDport(proto byte, port uint16) []expr.Any {
	return append(matchL4(proto), dportPayload(),
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)})
}

func matchDportRange(proto byte, from, to uint16) []expr.Any {
	return append(matchL4(proto), dportPayload(),
		&expr.Range{Op: expr.CmpOpEq, Register: 1,
			FromData: binary.BigEndian.AppendUint16(nil, from), ToData: binary.BigEndian.AppendUint16(nil, to)})
}

func dnatTo(a netip.Addr) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: a.AsSlice()},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1},
	}
}

func table() *nftables.Table {
	return &nftables.Table{Name: TableName, Family: nftables.TableFamilyIPv4}
}

// ensureNAT makes the nodevirt table hold exactly n's rules. When it does
// not, the table is replaced in one atomic batch (add, delete, re-create).
// The check and the batch go through c, a lasting connection in the pod
// netns (openPodSockets), instead of a socket per request.
func ensureNAT(c *nftables.Conn, n natRules) (bool, error) {
	fp := n.fingerprint()
	specs := n.specs()
	ok, err := natConverged(c, fp, specs)
	if err != nil || ok {
		return false, err
	}
	t := table()
	c.AddTable(t)
	c.DelTable(t)
	t = c.AddTable(table())
	chains := map[string]*nftables.Chain{
		chainPrerouting: c.AddChain(&nftables.Chain{Name: chainPrerouting, Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest}),
		chainPostrouting: c.AddChain(&nftables.Chain{Name: chainPostrouting, Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource}),
	}
	for _, s := range specs {
		c.AddRule(&nftables.Rule{Table: t, Chain: chains[s.chain], Exprs: s.exprs, UserData: fp})
	}
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("install nftables table %q: %w", TableName, err)
	}
	return true, nil
}

// natConverged reports whether the nodevirt chains hold exactly specs'
// rules of fingerprint fp. A missing table or chain makes GetRules fail with
// ENOENT, which is "not converged", so no separate table listing is needed.
func natConverged(c *nftables.Conn, fp []byte, specs []ruleSpec) (bool, error) {
	want := map[string]int{}
	for _, s := range specs {
		want[s.chain]++
	}
	for chain, n := range want {
		rules, err := c.GetRules(table(), &nftables.Chain{Name: chain})
		if isGone(err) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("list rules of %s/%s: %w", TableName, chain, err)
		}
		if len(rules) != n {
			return false, nil
		}
		for _, r := range rules {
			if !bytes.Equal(r.UserData, fp) {
				return false, nil
			}
		}
	}
	return true, nil
}

// deleteNAT removes the nodevirt table; absent is success (the batch adds
// it first, which is a no-op when it exists, so the delete cannot fail with
// ENOENT).
func deleteNAT() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	c.AddTable(table())
	c.DelTable(table())
	if err := c.Flush(); err != nil {
		return fmt.Errorf("delete nftables table %q: %w", TableName, err)
	}
	return nil
}
