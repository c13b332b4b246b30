package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/nodevirt/nodevirt/node/agent"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/node/unixsock"
	"github.com/nodevirt/nodevirt/qmp"
)

// qmpAttachFloor is the physical floor of re-adopting VMs: from this
// process, with as many at a time as the agent has workers, it connects
// to each QMP socket in sockets, reads the greeting, negotiates
// capabilities, asks query-status (what the agent's attach does) and
// hangs up, and returns how long all of them took. QEMU serves one QMP
// client at a time, so it must run while no agent holds the sockets: in
// the restart scenario, between the SIGKILL and the new process.
func qmpAttachFloor(ctx context.Context, sockets []string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sem := make(chan struct{}, agent.DefaultConfig().Workers)
	var wg sync.WaitGroup
	errs := make([]error, len(sockets))
	start := time.Now()
	for i, path := range sockets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = qmpAttachOnce(ctx, path)
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return took, err
		}
	}
	return took, nil
}

func qmpAttachOnce(ctx context.Context, path string) error {
	nc, err := unixsock.Dial(ctx, path)
	if err != nil {
		return fmt.Errorf("dial %s: %w", path, err)
	}
	c, err := qmp.NewConn(ctx, nc, path) // closes nc on failure
	if err != nil {
		return fmt.Errorf("QMP %s: %w", path, err)
	}
	defer c.Close()
	if _, err := c.QueryStatus(ctx); err != nil {
		return fmt.Errorf("query-status %s: %w", path, err)
	}
	return nil
}

// qmpSocket is the host path of the QMP socket of launcher pod podUID.
func (e *env) qmpSocket(podUID string) string {
	return filepath.Join(e.emptyDir(podUID, podfs.SocketsVolume), podfs.QMPSocket)
}
