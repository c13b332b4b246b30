package agent

import (
	"context"
	"sync"
	"time"
)

// A restarted agent re-adopts its VMs by syncing each once, and the sync of
// a running VM attaches to its QEMU. The syncs wait for the informers to
// list (the VMIs and pods of the node), which the attach does not need: the
// record names QEMU's sockets and process. preattach therefore attaches to
// the QEMUs of the live records while the informers list, and the first
// syncs find their connections open.
//
// It is only an earlier attach: the same domain.attach, to a QEMU the
// record says is alive, keeping the connection only when QEMU is the
// record's own process. Anything else (a replaced QEMU, a dial that fails)
// is left to the sync, which decides as it would have without it.

// preattach attaches to the QEMU of every live record of uids, as many at
// a time as there are workers, and returns when all are done or ctx ends.
func (a *Agent) preattach(ctx context.Context, uids []string) {
	sem := make(chan struct{}, max(a.cfg.Workers, 1))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, uid := range uids {
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			a.preattachOne(ctx, uid)
		}()
	}
}

func (a *Agent) preattachOne(ctx context.Context, uid string) {
	rec, err := a.deps.Store.Get(ctx, uid)
	if err != nil || rec.IsGone() || rec.Process.PID == 0 || rec.Sockets.QMP == "" ||
		!a.deps.Processes.Alive(rec.Process) {
		return
	}
	d := a.domain(uid)
	proc, dialed, err := d.attach(ctx, rec.Sockets.QMP, rec.Sockets.GuestAgent)
	if err != nil {
		a.log.Debug("preattach: left to the sync", "uid", uid, "err", err)
		return
	}
	if !dialed {
		return // a sync attached first
	}
	if proc != rec.Process {
		// Not the QEMU the record knows: the sync records the new one
		// (attach in apply.go) from a connection of its own.
		d.detach()
		a.enqueue(uid)
		return
	}
	a.log.Info("domain attached", "vmi", rec.Namespace+"/"+rec.Name, "uid", uid, "pid", proc.PID,
		"reattached", true, "preattached", true, "sinceStart", time.Since(a.started).Seconds())
}
