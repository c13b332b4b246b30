package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/store"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// obs builds an observation from a VMI phase and options.
func obs(phase v1.VirtualMachineInstancePhase, opts ...func(*Observation)) *Observation {
	o := &Observation{
		UID:  "u1",
		Node: "node1",
		VMI: &v1.VirtualMachineInstance{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm", UID: "u1",
				Labels:     map[string]string{v1.NodeNameLabel: "node1"},
				Finalizers: []string{v1.VirtualMachineInstanceFinalizer}},
			Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Devices: v1.Devices{
				AutoattachPodInterface: new(bool),
			}}},
			Status: v1.VirtualMachineInstanceStatus{Phase: phase},
		},
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-vm-x", UID: "p1"}},
		Now: now,
	}
	for _, f := range opts {
		f(o)
	}
	return o
}

func withRecord(o *Observation) {
	o.Record = &store.Record{UID: "u1", PodUID: "p1"}
}

// watched: the pod's sockets directory is watched (the launcher and QEMU
// wake the sync).
func watched(o *Observation) { o.PodWatched = true }

// noSocket: the launcher does not answer and has no socket yet.
func noSocket(o *Observation) { o.Launcher.NoSocket = true }

func withQEMU(o *Observation) {
	withRecord(o)
	o.Record.Process = store.Process{PID: 42, StartTime: 7}
	o.Launcher.State = launcher.StateRunning
	o.Runtime = RuntimeView{QMPConnected: true, RunState: "running", QEMUAlive: true}
}

func withLauncher(s launcher.State) func(*Observation) {
	return func(o *Observation) { o.Launcher.State = s }
}

func withNIC(o *Observation) {
	o.VMI.Spec.Domain.Devices.AutoattachPodInterface = nil
}

func deleted(o *Observation) {
	o.VMI.DeletionTimestamp = &metav1.Time{Time: now.Add(-time.Second)}
}

func withStop(deadline time.Time) func(*Observation) {
	return func(o *Observation) {
		o.Record.Intent.Stop = &store.Stop{Requested: now.Add(-time.Second), Deadline: deadline}
	}
}

func exited(guest bool) func(*Observation) {
	return func(o *Observation) {
		o.Launcher = LauncherView{State: launcher.StateExited, Exit: &launcher.Exit{GuestShutdown: guest}}
		o.Runtime = RuntimeView{}
	}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name string
		o    *Observation
		want Plan
	}{{
		name: "ControllerPhaseIgnored",
		o:    obs(v1.Scheduling),
		want: Plan{},
	}, {
		name: "ScheduledNoPodYetWaits",
		o:    obs(v1.Scheduled, func(o *Observation) { o.Pod = nil }),
		want: Plan{Requeue: pollStopping},
	}, {
		name: "ScheduledCreatesRecordFirst",
		o:    obs(v1.Scheduled),
		want: Plan{Actions: []ActionKind{ActCreateRecord}, Again: true},
	}, {
		name: "StoreFullRefusesANewVMI",
		o:    obs(v1.Scheduled, func(o *Observation) { o.Refusing = "store full" }),
		want: Plan{Actions: []ActionKind{ActRefuse}, Requeue: pollRefused},
	}, {
		name: "StoreFullKeepsLaunchingAVMIWithARecord",
		o:    obs(v1.Scheduled, withRecord, withLauncher(launcher.StateWaiting), func(o *Observation) { o.Refusing = "store full" }),
		want: Plan{Actions: []ActionKind{ActLaunch}, Requeue: pollStarting},
	}, {
		name: "LauncherNotUpYet",
		o:    obs(v1.Scheduled, withRecord),
		want: Plan{Requeue: pollStarting},
	}, {
		name: "LauncherNotUpYetWatched",
		o:    obs(v1.Scheduled, withRecord, watched),
		want: Plan{Requeue: pollWatched},
	}, {
		name: "LauncherSocketAwaitedWatched",
		o:    obs(v1.Scheduled, withRecord, watched, noSocket),
		want: Plan{Requeue: pollAwaitSocket},
	}, {
		name: "LauncherSocketAwaitedUnwatched",
		o:    obs(v1.Scheduled, withRecord, noSocket),
		want: Plan{Requeue: pollStarting},
	}, {
		// QEMU was started here and the launcher's socket is gone: no
		// socket creation is coming, so the short safety net stays.
		name: "LauncherSocketGoneWithQEMUWatched",
		o: obs(v1.Scheduled, withRecord, watched, noSocket, func(o *Observation) {
			o.Record.Process = store.Process{PID: 42, StartTime: 7}
			o.Runtime.QEMUAlive = true
		}),
		want: Plan{Requeue: pollWatched},
	}, {
		name: "LaunchWithoutNetwork",
		o:    obs(v1.Scheduled, withRecord, withLauncher(launcher.StateWaiting)),
		want: Plan{Actions: []ActionKind{ActLaunch}, Requeue: pollStarting},
	}, {
		name: "LaunchAllocatesNetworkBeforeBuilding",
		o:    obs(v1.Scheduled, withRecord, withNIC, withLauncher(launcher.StateWaiting)),
		want: Plan{Actions: []ActionKind{ActAllocateNetwork, ActEnsureNetwork, ActLaunch}, Requeue: pollStarting},
	}, {
		name: "LaunchWithCloudInit",
		o: obs(v1.Scheduled, withRecord, withLauncher(launcher.StateWaiting), func(o *Observation) {
			o.NeedsCloudInit = true
		}),
		want: Plan{Actions: []ActionKind{ActWriteCloudInit, ActLaunch}, Requeue: pollStarting},
	}, {
		name: "QEMUStartingWatched",
		o:    obs(v1.Scheduled, withRecord, watched, withLauncher(launcher.StatePreparing)),
		want: Plan{Requeue: pollWatched},
	}, {
		name: "LaunchWatched",
		o:    obs(v1.Scheduled, withRecord, watched, withLauncher(launcher.StateWaiting)),
		want: Plan{Actions: []ActionKind{ActLaunch}, Requeue: pollWatched},
	}, {
		name: "RunningAttaches",
		o:    obs(v1.Scheduled, withRecord, withLauncher(launcher.StateRunning)),
		want: Plan{Actions: []ActionKind{ActAttach}, PatchStatus: true},
	}, {
		name: "AfterRestartReattachAndRestartDHCP",
		o: obs(v1.Running, withQEMU, withNIC, func(o *Observation) {
			o.Runtime = RuntimeView{QEMUAlive: true}
			o.Record.Interfaces = []store.Interface{{Name: "default"}}
		}),
		want: Plan{Actions: []ActionKind{ActEnsureNetwork, ActAttach}, PatchStatus: true},
	}, {
		name: "QEMUDeadLauncherNotYetTold",
		o: obs(v1.Running, withQEMU, func(o *Observation) {
			o.Runtime = RuntimeView{}
		}),
		want: Plan{Requeue: pollStarting},
	}, {
		name: "ConvergedDoesNothingButReport",
		o:    obs(v1.Running, withQEMU),
		want: Plan{PatchStatus: true},
	}, {
		name: "QEMUExitedReleases",
		o:    obs(v1.Running, withQEMU, exited(false)),
		want: Plan{Actions: []ActionKind{ActRelease}, PatchStatus: true},
	}, {
		name: "LauncherAndQEMUGone",
		o: obs(v1.Running, withQEMU, func(o *Observation) {
			o.Launcher = LauncherView{}
			o.Runtime = RuntimeView{}
		}),
		want: Plan{Actions: []ActionKind{ActRelease}, PatchStatus: true},
	}, {
		name: "PodGoneQEMUStopping",
		o:    obs(v1.Running, withQEMU, func(o *Observation) { o.Pod = nil }),
		want: Plan{PatchStatus: true, Requeue: pollStopping},
	}, {
		name: "PodGoneQEMUGone",
		o:    obs(v1.Running, withQEMU, exited(true), func(o *Observation) { o.Pod = nil }),
		want: Plan{Actions: []ActionKind{ActRelease}, PatchStatus: true},
	}, {
		name: "FinishedReleasesOnce",
		o:    obs(v1.Succeeded, withRecord),
		want: Plan{Actions: []ActionKind{ActRelease}},
	}, {
		name: "FinishedAndReleased",
		o:    obs(v1.Failed, withRecord, func(o *Observation) { o.Record.Observed.Finished = now }),
		want: Plan{},
	}, {
		name: "FailedByControllerStopsQEMU",
		o:    obs(v1.Failed, withQEMU),
		want: Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping},
	}, {
		name: "DeletePowersDown",
		o:    obs(v1.Running, withQEMU, deleted),
		want: Plan{Actions: []ActionKind{ActPowerdown}, PatchStatus: true, Requeue: pollStopping},
	}, {
		name: "DeleteWaitsForGuest",
		o:    obs(v1.Running, withQEMU, deleted, withStop(now.Add(300*time.Millisecond))),
		want: Plan{PatchStatus: true, Requeue: 300 * time.Millisecond},
	}, {
		name: "DeleteGraceExpiredQuits",
		o:    obs(v1.Running, withQEMU, deleted, withStop(now)),
		want: Plan{Actions: []ActionKind{ActQuit}, PatchStatus: true, Requeue: pollStopping},
	}, {
		name: "DeleteAfterGuestShutdown",
		o:    obs(v1.Running, withQEMU, deleted, withStop(now.Add(time.Hour)), exited(true)),
		want: Plan{Actions: []ActionKind{ActRelease, ActMarkGone, ActRemoveFinalizer}, PatchStatus: true},
	}, {
		name: "DeleteBeforeAnythingRan",
		o:    obs(v1.Scheduled, deleted),
		want: Plan{Actions: []ActionKind{ActRemoveFinalizer}, PatchStatus: true},
	}, {
		name: "DeleteFinalizerAlreadyGone",
		o: obs(v1.Succeeded, deleted, withRecord, func(o *Observation) {
			o.Record.Gone = now
			o.VMI.Finalizers = nil
		}),
		want: Plan{PatchStatus: true},
	}, {
		name: "OrphanWithQEMUQuits",
		o:    obs(v1.Running, withQEMU, func(o *Observation) { o.VMI = nil }),
		want: Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping},
	}, {
		name: "OrphanWithoutQEMUMarkedGone",
		o:    obs(v1.Running, withRecord, func(o *Observation) { o.VMI = nil }),
		want: Plan{Actions: []ActionKind{ActRelease, ActMarkGone}},
	}, {
		name: "TombstoneIgnored",
		o: obs(v1.Running, withRecord, func(o *Observation) {
			o.VMI = nil
			o.Record.Gone = now
		}),
		want: Plan{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, plan(tt.o)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}
