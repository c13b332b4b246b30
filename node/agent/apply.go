package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/launchspec/convert"
	"github.com/nodevirt/nodevirt/node/podfs"
	"github.com/nodevirt/nodevirt/node/status"
	"github.com/nodevirt/nodevirt/store"
)

// apply runs one action. It updates o.Record when it writes the record, so
// later actions of the same sync see what earlier ones persisted.
func (a *Agent) apply(ctx context.Context, act ActionKind, o *Observation) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	switch act {
	case ActRefuse:
		a.warn(o.VMI, EventNodeStoreFull, o.Refusing)
		return nil
	case ActCreateRecord:
		return a.createRecord(ctx, o)
	case ActAllocateNetwork:
		return a.allocateNetwork(ctx, o)
	case ActEnsureNetwork:
		return a.ensureNetwork(ctx, o)
	case ActWriteCloudInit:
		return writeCloudInit(o.VMI, a.pod(o))
	case ActLaunch:
		return a.launch(ctx, o)
	case ActAttach:
		return a.attach(ctx, o)
	case ActPowerdown:
		return a.powerdown(ctx, o)
	case ActQuit:
		return a.quit(ctx, o)
	case ActRelease:
		return a.release(ctx, o)
	case ActMarkGone:
		return a.markGone(ctx, o)
	case ActPause:
		return a.reapplyPause(ctx, o)
	case ActReboot:
		return a.advanceReboot(ctx, o)
	case ActThaw:
		return a.thawDue(ctx, o)
	case ActIncoming:
		return a.prepareIncoming(ctx, o)
	case ActResumeArrived:
		return a.resumeArrivedGuest(ctx, o)
	case ActTargetDetected:
		return a.reportTargetDetected(ctx, o)
	case ActMigrateSource:
		return a.migrateSource(ctx, o)
	}
	return fmt.Errorf("unknown action %q", act)
}

// pod is the launcher pod directory of o (it exists whenever an action
// that needs it is planned).
func (a *Agent) pod(o *Observation) podfs.Pod {
	p, _ := a.podDir(o)
	return p
}

func (a *Agent) update(ctx context.Context, o *Observation, fn func(*store.Record) error, events ...store.Event) error {
	rec, err := a.deps.Store.Update(ctx, o.UID, fn, events...)
	if err != nil {
		return err
	}
	o.Record = &rec
	return nil
}

func (a *Agent) event(reason, msg string) store.Event {
	return store.Event{Time: a.now(), Reason: reason, Message: msg}
}

// createRecord persists the VMI's record before anything is built for it.
func (a *Agent) createRecord(ctx context.Context, o *Observation) error {
	pod, err := podfs.New(a.cfg.KubeletRoot, string(o.Pod.UID))
	if err != nil {
		return err
	}
	rec := store.Record{
		UID: o.UID, Namespace: o.VMI.Namespace, Name: o.VMI.Name, PodUID: string(o.Pod.UID),
		Sockets: store.Sockets{
			Dir:        pod.SocketsDir(),
			Launcher:   pod.Socket(podfs.LauncherSocket),
			QMP:        pod.Socket(podfs.QMPSocket),
			GuestAgent: pod.Socket(podfs.GuestAgentSock),
			Serial:     pod.Socket(podfs.SerialSocket),
		},
		Observed: store.Observed{At: a.now()},
		Intent:   store.Intent{Paused: startsPaused(o.VMI)},
	}
	if p := o.VMI.Status.Phase; p.OwnedByAgent() {
		// The observed phase is the VMI's agent-owned one (recordphase.go):
		// a VMI prelaunched before Scheduled has none yet.
		rec.Observed.Phase = string(p)
	}
	if g := o.VMI.Spec.Domain.Devices.AutoattachGraphicsDevice; g == nil || *g {
		rec.Sockets.VNC = pod.Socket(podfs.VNCSocket) // QEMU has VGA + VNC
	}
	msg := "launcher pod " + o.Pod.Name
	if m := a.targetRecord(o); m != nil {
		// A migration target: the guest's pause travels with the
		// migration stream; the user's pause intent is the VMI's
		// Paused condition, not its start strategy.
		rec.Migration = m
		rec.Intent.Paused = conditionTrue(o.VMI, v1.VirtualMachineInstancePaused)
		msg += ", target of migration " + m.UID + " from " + m.SourceNode
	}
	if err := a.deps.Store.Put(ctx, rec, a.event("Adopted", msg)); err != nil {
		return err
	}
	if rec.Migration != nil {
		a.log.Info("migration target adopted", "vmi", o.name(), "uid", o.UID, "migration", rec.Migration.UID,
			"source", rec.Migration.SourceNode, "pod", o.Pod.Name)
	}
	o.Record = &rec
	return nil
}

// allocateNetwork persists tap names, MACs and guest addresses.
func (a *Agent) allocateNetwork(ctx context.Context, o *Observation) error {
	ifs, err := allocate(o.VMI)
	if err != nil {
		return err
	}
	return a.update(ctx, o, func(r *store.Record) error {
		r.Interfaces = ifs
		return nil
	}, a.event("NetworkAllocated", fmt.Sprintf("%d interface(s)", len(ifs))))
}

// ensureNetwork builds the network in the pod netns (found through QEMU's
// pid, or before QEMU runs the launcher's) and (re)starts the DHCP
// servers. A running QEMU spares a call to its launcher: after an agent
// restart every VM's network is ensured at once.
func (a *Agent) ensureNetwork(ctx context.Context, o *Observation) error {
	pid := o.Record.Process.PID
	if !a.deps.Processes.Alive(o.Record.Process) {
		var err error
		if pid, err = a.deps.Launcher.PID(ctx, o.Record.Sockets.Launcher); err != nil {
			return fmt.Errorf("find the pod netns: %w", err)
		}
	}
	ps, err := plans(o.VMI, o.Record, pid)
	if err != nil {
		return err
	}
	ns := netnsPath(pid)
	res, err := ensureNetwork(ctx, a.deps.Network, ns, ps)
	if err != nil {
		return err
	}
	if err := a.domain(o.UID).serveDHCP(ctx, ns, res); err != nil {
		return err
	}
	ifs := recordResults(o.Record.Interfaces, res)
	if slices.EqualFunc(ifs, o.Record.Interfaces, sameInterface) {
		return nil
	}
	return a.update(ctx, o, func(r *store.Record) error {
		r.Interfaces = ifs
		return nil
	}, a.event("NetworkReady", ""))
}

func sameInterface(x, y store.Interface) bool {
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(bx) == string(by)
}

// launch builds the spec, persists it, then hands it to the launcher.
func (a *Agent) launch(ctx context.Context, o *Observation) error {
	pvcs, err := pvcsOfPod(o.Pod)
	if err != nil {
		return err
	}
	spec, err := convert.Build(convert.Input{
		VMI:            o.VMI,
		Node:           convert.NodeFacts{KVM: podKVM(a.deps.KVM, o.Pod)},
		AllowEmulation: a.cfg.AllowEmulation,
		Interfaces:     nics(o.Record.Interfaces),
		Paths:          launchspec.DefaultPaths(),
		BlockPVCs:      pvcs.block,
		PVCCapacities:  pvcs.capacities,
		ImageVolumes:   hasImageVolumes(o.Pod),
		StartPaused:    o.Record.Intent.Paused,
		Incoming:       o.incomingTarget(),
	})
	if err != nil {
		a.warn(o.VMI, "SyncFailed", err.Error())
		return err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Spec = raw
		return nil
	}, a.event("Launching", "spec "+spec.Hash)); err != nil {
		return err
	}
	err = a.deps.Launcher.Launch(ctx, o.Record.Sockets.Launcher, spec)
	if errors.Is(err, launcher.ErrConflict) {
		return fmt.Errorf("launcher already runs another spec: %w", err)
	}
	return err
}

// attach connects to QMP and the guest agent and records QEMU's process.
func (a *Agent) attach(ctx context.Context, o *Observation) error {
	proc, dialed, err := a.domain(o.UID).attach(ctx, o.Record.Sockets.QMP, o.Record.Sockets.GuestAgent)
	if err != nil {
		return err
	}
	o.Runtime.QEMUAlive = true
	if dialed {
		a.log.Info("domain attached", "vmi", o.name(), "uid", o.UID, "pid", proc.PID,
			"reattached", proc == o.Record.Process, "sinceStart", time.Since(a.started).Seconds())
	}
	if proc == o.Record.Process {
		return nil // re-attached to the same QEMU: nothing to write
	}
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Process = proc
		if r.Observed.Started.IsZero() {
			r.Observed.Started = a.now()
		}
		return nil
	}, a.event("Attached", fmt.Sprintf("QEMU pid %d", proc.PID))); err != nil {
		return err
	}
	a.pinDedicatedCPUs(ctx, o, proc)
	return nil
}

// powerdown persists the stop intent, then presses the power button.
func (a *Agent) powerdown(ctx context.Context, o *Observation) error {
	grace := v1.DefaultTerminationGracePeriodSeconds
	if g := o.VMI.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	now := a.now()
	stop := &store.Stop{Requested: now, Deadline: now.Add(time.Duration(grace) * time.Second), Reason: "Deleted"}
	if err := a.update(ctx, o, func(r *store.Record) error {
		r.Intent.Stop = stop
		return nil
	}, a.event(status.ReasonShuttingDown, fmt.Sprintf("grace period %ds", grace))); err != nil {
		return err
	}
	a.normal(o.VMI, status.ReasonShuttingDown, "Signaled Graceful Shutdown")
	conn, err := a.qmp(ctx, o)
	if err != nil {
		return err
	}
	return conn.SystemPowerdown(ctx)
}

// quit stops QEMU now: QMP quit, or SIGKILL when QMP does not work.
func (a *Agent) quit(ctx context.Context, o *Observation) error {
	d := a.domain(o.UID)
	if conn, err := a.qmp(ctx, o); err == nil {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = conn.Quit(qctx)
		cancel()
		if err == nil {
			d.setQuitAt(a.now())
			return nil
		}
	}
	if at := d.quitSentAt(); !at.IsZero() && a.now().Sub(at) < quitGrace {
		return nil // it accepted quit and is exiting
	}
	if o.Record != nil && a.deps.Processes.Alive(o.Record.Process) {
		return a.deps.Processes.Kill(o.Record.Process)
	}
	return nil
}

// quitGrace is how long a QEMU that accepted quit gets to exit before the
// agent kills it: freeing a large guest's memory takes a while under load,
// and a killed QEMU ends its launcher and pod as failed (a source pod whose
// guest migrated away must complete).
const quitGrace = 10 * time.Second

// qmp returns the domain's QMP connection, attaching if needed.
func (a *Agent) qmp(ctx context.Context, o *Observation) (Monitor, error) {
	d := a.domain(o.UID)
	if c := d.qmpConn(); c != nil {
		return c, nil
	}
	if err := a.attach(ctx, o); err != nil {
		return nil, err
	}
	if c := d.qmpConn(); c != nil {
		return c, nil
	}
	return nil, errors.New("QMP connection closed right after attach")
}

// release closes the domain's connections, stops DHCP and removes the
// network when the pod's netns can still be reached (otherwise it dies
// with the pod).
func (a *Agent) release(ctx context.Context, o *Observation) error {
	a.dropDomain(o.UID)
	if len(o.Record.Interfaces) > 0 {
		pid, err := a.deps.Launcher.PID(ctx, o.Record.Sockets.Launcher)
		if err != nil && a.deps.Processes.Alive(o.Record.Process) {
			pid, err = o.Record.Process.PID, nil
		}
		if err == nil {
			for _, p := range releasePlans(o.Record.Interfaces) {
				if err := a.deps.Network.Release(ctx, netnsPath(pid), p); err != nil {
					return err
				}
			}
		}
	}
	return a.update(ctx, o, func(r *store.Record) error {
		r.Observed.Finished = a.now()
		return nil
	}, a.event("Released", ""))
}

// markGone turns the record into a tombstone.
func (a *Agent) markGone(ctx context.Context, o *Observation) error {
	a.dropDomain(o.UID)
	rec, err := a.deps.Store.MarkGone(ctx, o.UID, a.now(), a.event(status.ReasonDeleted, ""))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	o.Record = &rec
	a.log.Info("record marked gone", "vmi", o.name(), "uid", o.UID)
	return nil
}

// hasImageVolumes reports whether a launcher pod has the ImageVolumes
// shape: its images are Kubernetes image volumes, not holder containers.
// The pod spec, not the cluster's configuration, is what the kubelet
// mounted.
func hasImageVolumes(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil {
			return true
		}
	}
	return false
}
