package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
)

// portForward handles GET .../portforward/{port}[/{protocol}]: a websocket
// (subprotocol plain.kubevirt.io, binary messages) bridged to the guest's
// port, dialed from the VMI's pod network. For udp each message is one
// datagram. Unlike console and VNC, any number of forwards may be open.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request, uid string) {
	port, proto, err := forwardTarget(r.PathValue("port"), r.PathValue("protocol"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	dctx, dcancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
	nc, err := s.deps.Domains.DialGuest(dctx, uid, proto, port)
	dcancel()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer nc.Close()
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade answered the client
	}
	defer ws.Close()
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	s.log.Info("port-forward opened", "uid", uid, "port", port, "protocol", proto)
	err = pump(ctx, ws, nc, s.cfg.PingPeriod, proto == "udp")
	s.log.Info("port-forward closed", "uid", uid, "port", port, "protocol", proto, "err", err)
}

// forwardTarget validates the port and protocol path parameters; an empty
// protocol is tcp.
func forwardTarget(port, proto string) (int, string, error) {
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return 0, "", badRequest(fmt.Sprintf("port %q: want a number from 1 to 65535", port))
	}
	switch proto {
	case "":
		proto = "tcp"
	case "tcp", "udp":
	default:
		return 0, "", badRequest(fmt.Sprintf("protocol %q: want tcp or udp", proto))
	}
	return p, proto, nil
}
