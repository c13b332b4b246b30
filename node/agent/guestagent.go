package agent

import (
	"context"
	"errors"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/qmp"
)

// Guest agent probing: a ping every agentPeriod, and at once when the guest
// opens its virtio-serial port (QMP VSERPORT_CHANGE) or its vCPUs run again
// (a resume; an incoming migration's guest arrived and resumed); none while
// they are stopped (guestHalted: paused, started paused, not arrived yet),
// where a ping would only sit in the channel until they run. So a restarted
// agent does not dial the qemu-ga of each paused VM it re-adopts, and a
// paused VM keeps AgentConnected. The agent counts as
// disconnected only after agentFailures failed pings in a row, so one slow
// or garbled answer (for example right after another client used the
// channel) does not flap AgentConnected.
const (
	agentPeriod   = 5 * time.Second
	agentTimeout  = 2 * time.Second
	agentFailures = 3
	// agentRetry is the next probe's delay when the one after the port
	// opened failed (qemu-ga opens the port before it reads).
	agentRetry = 500 * time.Millisecond
)

// watchGuestAgent pings the guest agent periodically and when probeNow
// says, and enqueues the VMI when its connectivity changes.
func (d *domain) watchGuestAgent(ctx context.Context, path string, probeNow <-chan struct{}) {
	var ga GuestAgent
	defer func() {
		if ga != nil {
			d.publishAgent(nil)
			ga.Close()
		}
	}()
	failures := 0
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		opened := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-probeNow:
			opened = true
		}
		t.Reset(agentPeriod)
		if d.halted() {
			continue
		}
		info, known, err := d.probeAgent(ctx, &ga, path)
		if err != nil && opened {
			t.Reset(agentRetry)
		}
		if err == nil {
			failures = 0
			// Both views are updated before either enqueues, so the
			// first report after a connect carries both.
			netChanged := d.probeGuestNet(ctx, ga)
			d.setAgent(true, info, known)
			if netChanged {
				d.enqueue(d.uid)
			}
			continue
		}
		if failures++; failures >= agentFailures {
			d.setAgent(false, qmp.OSInfo{}, false)
		}
	}
}

// probeAgent pings the guest agent (dialing it if needed) and reads its OS
// info; known is false when the agent answered the ping but refused the
// OS info (qemu-ga of a guest whose filesystems are frozen runs only ping,
// info, sync and the fsfreeze status and thaw): it is connected, with the
// last OS info still true. A broken connection is dropped so the next
// probe redials.
func (d *domain) probeAgent(ctx context.Context, ga *GuestAgent, path string) (info qmp.OSInfo, known bool, err error) {
	if *ga == nil {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.qemu.DialGuestAgent(dctx, path)
		cancel()
		if err != nil {
			return qmp.OSInfo{}, false, err
		}
		*ga = c
		d.publishAgent(c)
	}
	pctx, cancel := context.WithTimeout(ctx, agentTimeout)
	defer cancel()
	err = (*ga).Ping(pctx)
	if err == nil {
		known = true
		var qe *qmp.Error
		if info, err = (*ga).OSInfo(pctx); errors.As(err, &qe) {
			known, err = false, nil
		}
	}
	select {
	case <-(*ga).Done():
		(*ga).Close()
		*ga = nil
		d.publishAgent(nil)
	default:
	}
	return info, known, err
}

// setAgent records the guest agent's connectivity and, when known, its OS
// info, and enqueues the VMI when either changed.
func (d *domain) setAgent(ok bool, info qmp.OSInfo, known bool) {
	gi := v1.VirtualMachineInstanceGuestOSInfo{}
	if ok {
		gi = v1.VirtualMachineInstanceGuestOSInfo{
			Name: info.Name, KernelRelease: info.KernelRelease, Version: info.Version,
			PrettyName: info.PrettyName, VersionID: info.VersionID,
			KernelVersion: info.KernelVersion, Machine: info.Machine, ID: info.ID,
		}
	}
	d.mu.Lock()
	changed := !d.probed || d.agentOK != ok || (ok && known && d.osInfo != gi)
	d.agentOK, d.probed = ok, true
	if ok && known {
		d.osInfo = gi
	}
	d.mu.Unlock()
	if changed {
		d.enqueue(d.uid)
	}
}

// guestOSInfo returns the last OS info the guest agent reported.
func (d *domain) guestOSInfo() v1.VirtualMachineInstanceGuestOSInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.osInfo
}

// publishAgent shares (or withdraws, with nil) the guest agent connection.
func (d *domain) publishAgent(ga GuestAgent) {
	d.mu.Lock()
	d.ga = ga
	d.mu.Unlock()
}

// guestAgent returns the guest agent connection, nil when not connected.
func (d *domain) guestAgent() GuestAgent {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.agentOK {
		return nil
	}
	return d.ga
}
