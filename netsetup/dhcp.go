package netsetup

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// InfiniteLease is the DHCP lease time meaning "forever" (RFC 2131 §3.3).
const InfiniteLease = 0xffffffff

// Lease is everything the DHCP server hands to one guest. Get it from
// Result.Lease.
type Lease struct {
	Interface string           // link in the pod netns the server binds to (our bridge)
	ServerIP  netip.Addr       // server identifier
	ClientMAC net.HardwareAddr // only this MAC is answered
	ClientIP  netip.Prefix     // the guest's address and prefix
	Router    netip.Addr       // default gateway; zero = none
	DNS       []netip.Addr     // IPv4 nameservers
	Search    []string         // search domains (option 119)
	Hostname  string           // option 12; "" = none
	MTU       int              // option 26; 0 = none
	LeaseTime uint32           // seconds; 0 = InfiniteLease
}

// reply computes the answer to req. ok is false when req is not for us
// (another MAC, another server, or a message type we do not answer).
func (l Lease) reply(req *dhcpv4.DHCPv4) (resp *dhcpv4.DHCPv4, ok bool, err error) {
	if req.OpCode != dhcpv4.OpcodeBootRequest || !bytes.Equal(req.ClientHWAddr, l.ClientMAC) {
		return nil, false, nil
	}
	var typ dhcpv4.MessageType
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		typ = dhcpv4.MessageTypeOffer
	case dhcpv4.MessageTypeRequest:
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(l.ServerIP.AsSlice()) {
			return nil, false, nil // the client picked another server
		}
		want := req.RequestedIPAddress()
		if want == nil || want.IsUnspecified() {
			want = req.ClientIPAddr
		}
		typ = dhcpv4.MessageTypeAck
		if !want.Equal(l.ClientIP.Addr().AsSlice()) {
			typ = dhcpv4.MessageTypeNak
		}
	default:
		return nil, false, nil
	}
	mods := []dhcpv4.Modifier{
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(l.ServerIP.AsSlice())),
	}
	if typ != dhcpv4.MessageTypeNak {
		mods = append(mods, l.offerOptions()...)
	}
	resp, err = dhcpv4.NewReplyFromRequest(req, mods...)
	if err != nil {
		return nil, false, fmt.Errorf("build DHCP %s for %s: %w", typ, l.ClientMAC, err)
	}
	return resp, true, nil
}

func (l Lease) offerOptions() []dhcpv4.Modifier {
	lt := l.LeaseTime
	if lt == 0 {
		lt = InfiniteLease
	}
	mods := []dhcpv4.Modifier{
		dhcpv4.WithYourIP(l.ClientIP.Addr().AsSlice()),
		dhcpv4.WithServerIP(l.ServerIP.AsSlice()),
		dhcpv4.WithNetmask(net.CIDRMask(l.ClientIP.Bits(), 32)),
		dhcpv4.WithLeaseTime(lt),
	}
	if l.Router.IsValid() {
		mods = append(mods, dhcpv4.WithRouter(l.Router.AsSlice()))
	}
	if len(l.DNS) > 0 {
		ips := make([]net.IP, 0, len(l.DNS))
		for _, a := range l.DNS {
			ips = append(ips, a.AsSlice())
		}
		mods = append(mods, dhcpv4.WithDNS(ips...))
	}
	if len(l.Search) > 0 {
		mods = append(mods, dhcpv4.WithDomainSearchList(l.Search...))
	}
	if l.Hostname != "" {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptHostName(l.Hostname)))
	}
	if l.MTU > 0 {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, binary.BigEndian.AppendUint16(nil, uint16(l.MTU)))))
	}
	return mods
}

// DHCPServer answers one guest's DHCP requests on a socket opened inside
// its pod netns. A socket stays in the netns it was created in, so Serve
// may run on any goroutine.
type DHCPServer struct {
	lease Lease
	conn  *net.UDPConn
	log   *slog.Logger
	once  sync.Once
}

// ListenDHCP opens the server's socket (UDP :67, bound to lease.Interface)
// in the netns at netnsPath. Errors here (no such netns, no bridge yet) are
// reported synchronously, before the caller starts Serve.
func ListenDHCP(ctx context.Context, netnsPath string, lease Lease, log *slog.Logger) (*DHCPServer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &DHCPServer{lease: lease, log: log}
	err := inNetNS(ctx, netnsPath, func() error {
		c, err := server4.NewIPv4UDPConn(lease.Interface, &net.UDPAddr{Port: dhcpv4.ServerPort})
		s.conn = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen DHCP on %q: %w", lease.Interface, err)
	}
	return s, nil
}

// Serve answers requests until ctx is cancelled or Close is called; it then
// returns nil. It closes the socket on return.
func (s *DHCPServer) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = s.Close() })
	defer stop()
	defer s.Close()
	buf := make([]byte, 1500)
	for {
		n, peer, err := s.conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("DHCP on %q: read: %w", s.lease.Interface, err)
		}
		if err := s.handle(buf[:n]); err != nil {
			s.log.Debug("dhcp: dropped request", "iface", s.lease.Interface, "peer", peer, "err", err)
		}
	}
}

func (s *DHCPServer) handle(pkt []byte) error {
	req, err := dhcpv4.FromBytes(pkt)
	if err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	resp, ok, err := s.lease.reply(req)
	if err != nil || !ok {
		return err
	}
	// Always broadcast: the client has no address yet (DISCOVER/REQUEST)
	// and, in bridge binding, the netns has no route to the guest's IP.
	dst := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	if _, err := s.conn.WriteTo(resp.ToBytes(), dst); err != nil {
		return fmt.Errorf("send %s: %w", resp.MessageType(), err)
	}
	s.log.Debug("dhcp: answered", "iface", s.lease.Interface, "type", resp.MessageType().String(), "ip", s.lease.ClientIP)
	return nil
}

// Close closes the socket; Serve then returns.
func (s *DHCPServer) Close() error {
	var err error
	s.once.Do(func() { err = s.conn.Close() })
	return err
}

// ServeDHCP listens and serves in one call, until ctx is cancelled. The
// agent runs one per VMI interface on its own goroutine.
func ServeDHCP(ctx context.Context, netnsPath string, lease Lease) error {
	s, err := ListenDHCP(ctx, netnsPath, lease, nil)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}
