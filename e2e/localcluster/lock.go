package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// LockFile serialises users of the host's one local cluster.
const LockFile = "/run/lock/nodevirt-cluster.lock"

// LockWait is how long a test should wait for the lock. `make test` runs
// the cluster suites one after another (hack/test.sh), but `go test ./...`
// runs packages in parallel and the suites queue behind each other (the
// acceptance suite alone holds the cluster for about 25 minutes), so the
// wait is long; the go test -timeout of make test is 85 minutes to match.
const LockWait = 75 * time.Minute

// Lock waits until this process holds the host-wide cluster lock (or ctx
// ends) and returns the function that releases it. The lock is an flock, so
// it is released when the process dies.
func Lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll("/run/lock", 0o755); err != nil {
		return nil, fmt.Errorf("cluster lock: %w", err)
	}
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster lock: %w", err)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("cluster lock %s: %w", LockFile, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("cluster lock %s: %w", LockFile, ctx.Err())
		case <-tick.C:
		}
	}
}
