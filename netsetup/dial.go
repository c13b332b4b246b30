package netsetup

import (
	"context"
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/ns"
)

// DialInNetNS connects to address over network ("tcp" or "udp") from inside
// the network namespace at nsPath: the socket is created on an OS thread
// switched into the namespace, then the thread returns to the caller's
// namespace (inNetNS); the connection keeps the namespace it was created
// in. Used to reach a guest from its pod's network (port-forward).
func DialInNetNS(ctx context.Context, nsPath, network, address string) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var c net.Conn
	err := ns.WithNetNSPath(nsPath, func(ns.NetNS) error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s %s in netns %s: %w", network, address, nsPath, err)
	}
	return c, nil
}
