package netsetup

import (
	"context"
	"fmt"
	"os"

	"github.com/google/nftables"
)

// podSockets are what one Ensure reaches a pod netns through: an
// rtnetlink socket, a lasting nftables socket and the /proc/sys files its
// steps check. They are opened together on one thread switched into the
// netns (one inNetNS) and keep that netns whichever thread uses them after
// (a socket belongs to the netns it was created in, a /proc/sys/net file to
// its opener's), so the steps run on the caller's goroutine. A converged
// Ensure, the agent's re-adoption path, makes its dozen reads without a
// locked thread, on which every read that waits would hand the scheduler's
// P to another thread and back. Only creating a tap enters the netns again
// (rtnl.enter).
type podSockets struct {
	rt      rtnl
	nft     *nftables.Conn
	sysctls map[string]sysctlFile // by path
}

// openPodSockets opens the sockets and the sysctl files (paths under
// /proc/sys) in the netns at netnsPath.
func openPodSockets(ctx context.Context, netnsPath string, sysctls []string) (*podSockets, error) {
	ps := &podSockets{sysctls: make(map[string]sysctlFile, len(sysctls))}
	enter := func(f func() error) error { return inNetNS(ctx, netnsPath, f) }
	err := enter(func() error {
		var err error
		if ps.rt, err = openRTNL(enter); err != nil {
			return err
		}
		if ps.nft, err = nftables.New(nftables.AsLasting()); err != nil {
			return fmt.Errorf("nftables: %w", err)
		}
		for _, path := range sysctls {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return fmt.Errorf("open %s: %w", path, err)
			}
			ps.sysctls[path] = sysctlFile{f}
		}
		return nil
	})
	if err != nil {
		ps.close()
		return nil, err
	}
	return ps, nil
}

// sysctl is the file at path, opened by openPodSockets.
func (ps *podSockets) sysctl(path string) (sysctlFile, error) {
	f, ok := ps.sysctls[path]
	if !ok {
		return sysctlFile{}, fmt.Errorf("%s was not opened in the pod netns", path)
	}
	return f, nil
}

// close closes what openPodSockets opened; nothing is written through
// them that a close could lose.
func (ps *podSockets) close() {
	ps.rt.close()
	if ps.nft != nil {
		_ = ps.nft.CloseLasting()
	}
	for _, f := range ps.sysctls {
		_ = f.Close()
	}
}
