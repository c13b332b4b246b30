package netsetup

import (
	"context"
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
)

// inNetNS runs f on an OS thread switched into the network namespace at
// path (a /proc/<pid>/ns/net or a bind mount of one). The thread is locked
// for the duration and restored afterwards; f must not start goroutines that
// expect to be in the namespace.
func inNetNS(ctx context.Context, path string, f func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := ns.WithNetNSPath(path, func(ns.NetNS) error { return f() })
	if err != nil {
		return fmt.Errorf("netns %s: %w", path, err)
	}
	return nil
}
