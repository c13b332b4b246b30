package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/store"
)

const migUID = "m1"

// incomingTo makes o's VMI migrate from node0 to this node (node1): the
// target label, not the node label.
func incomingTo(o *Observation) {
	o.VMI.Labels = map[string]string{v1.NodeNameLabel: "node0", v1.MigrationTargetNodeNameLabel: "node1"}
	o.VMI.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{
		MigrationUID: migUID, SourceNode: "node0", TargetNode: "node1"}
	o.Pod.Labels = map[string]string{v1.MigrationJobUIDLabel: migUID}
}

// targetRec gives o a target record in state.
func targetRec(state string) func(*Observation) {
	return func(o *Observation) {
		if o.Record == nil {
			withRecord(o)
		}
		o.Record.Migration = &store.Migration{UID: migUID, Role: roleTarget, State: state, SourceNode: "node0",
			Address: "10.0.0.2:8187", Started: now}
	}
}

// reported marks the target's ready fields as written.
func reported(o *Observation) {
	o.VMI.Status.MigrationState.TargetNodeAddress = "10.0.0.2:8187"
	o.VMI.Status.MigrationState.TargetNodeDomainReadyTimestamp = &metav1.Time{Time: now}
}

func TestPlan_MigrationTarget(t *testing.T) {
	tests := []struct {
		name string
		o    *Observation
		want Plan
	}{{
		name: "NoTargetPodYet",
		o:    obs(v1.Running, incomingTo, func(o *Observation) { o.Pod = nil }),
		want: Plan{Requeue: pollStopping},
	}, {
		name: "RecordFirst",
		o:    obs(v1.Running, incomingTo),
		want: Plan{Actions: []ActionKind{ActCreateRecord}, Again: true},
	}, {
		name: "BuildsAndLaunches",
		o:    obs(v1.Running, incomingTo, withNIC, targetRec(migPreparing), withLauncher(launcher.StateWaiting)),
		want: Plan{Actions: []ActionKind{ActAllocateNetwork, ActEnsureNetwork, ActLaunch}, Requeue: pollStarting},
	}, {
		name: "ListensOnceQEMURuns",
		o:    obs(v1.Running, incomingTo, withQEMU, targetRec(migPreparing), runState("inmigrate")),
		want: Plan{Actions: []ActionKind{ActIncoming}},
	}, {
		name: "ReadyWaitsForTheStream",
		o:    obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), runState("inmigrate"), reported),
		want: Plan{Requeue: pollStopping},
	}, {
		name: "ReadyNotReportedYet",
		o:    obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), runState("inmigrate")),
		want: Plan{Actions: []ActionKind{ActIncoming}},
	}, {
		name: "GuestRunsHere",
		o:    obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), reported),
		want: Plan{Actions: []ActionKind{ActTargetDetected}},
	}, {
		name: "ArrivedPausedWaitsForTheSourcesVerdict",
		o:    obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), reported, runState("paused")),
		want: Plan{Requeue: pollStopping},
	}, {
		name: "ArrivedPausedIsResumedOnceTheSourceCompleted",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), reported, runState("paused"), func(o *Observation) {
			o.VMI.Status.MigrationState.Completed = true
		}),
		want: Plan{Actions: []ActionKind{ActResumeArrived, ActTargetDetected}},
	}, {
		name: "ArrivedPausedByTheUserStaysPaused",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), reported, runState("paused"), func(o *Observation) {
			o.Record.Intent.Paused = true
		}),
		want: Plan{Actions: []ActionKind{ActTargetDetected}},
	}, {
		name: "DetectedWaitsForHandoff",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migDetected), reported, func(o *Observation) {
			o.VMI.Status.MigrationState.TargetNodeDomainDetected = true
		}),
		want: Plan{Requeue: pollStopping},
	}, {
		name: "FailedQuitsTargetQEMU",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), runState("inmigrate"), func(o *Observation) {
			o.VMI.Status.MigrationState.Failed = true
		}),
		want: Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping},
	}, {
		name: "AbortQuitsTargetQEMU",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), runState("inmigrate"), func(o *Observation) {
			o.VMI.Status.MigrationState.AbortRequested = true
		}),
		want: Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping},
	}, {
		name: "AbortOfAStartedTransferWaitsForTheSource",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), runState("inmigrate"), reported, func(o *Observation) {
			o.VMI.Status.MigrationState.AbortRequested = true
			o.VMI.Status.MigrationState.StartTimestamp = &metav1.Time{Time: now}
		}),
		want: Plan{Requeue: pollStopping},
	}, {
		name: "AbortedTransferQuitsTargetQEMU",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), runState("inmigrate"), reported, func(o *Observation) {
			o.VMI.Status.MigrationState.AbortRequested = true
			o.VMI.Status.MigrationState.StartTimestamp = &metav1.Time{Time: now}
			o.VMI.Status.MigrationState.Failed = true
		}),
		want: Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping},
	}, {
		name: "IncomingFailedQEMUExited",
		o:    obs(v1.Running, incomingTo, targetRec(migReady), exited(false)),
		want: Plan{Actions: []ActionKind{ActRelease, ActMarkGone}},
	}, {
		name: "TargetLabelRemoved",
		o:    obs(v1.Running, withQEMU, targetRec(migReady), func(o *Observation) { o.VMI = nil }),
		want: Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping},
	}, {
		name: "EndedTargetNotRebuilt",
		o: obs(v1.Running, incomingTo, targetRec(migReady), withLauncher(launcher.StateExited), func(o *Observation) {
			o.Record.Gone = now
		}),
		want: Plan{},
	}, {
		name: "PreviousMigrationsTargetTornDown",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migReady), func(o *Observation) {
			o.Record.Migration.UID = "m0"
		}),
		want: Plan{Actions: []ActionKind{ActQuit}, Requeue: pollStopping},
	}, {
		name: "AfterHandoffAnOrdinaryDomain",
		o: obs(v1.Running, incomingTo, withQEMU, targetRec(migDetected), func(o *Observation) {
			o.VMI.Labels = map[string]string{v1.NodeNameLabel: "node1"}
		}),
		want: Plan{PatchStatus: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan(tt.o)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if got.PatchStatus && tt.o.incoming() != nil {
				t.Errorf("a target patches the status before the handoff")
			}
		})
	}
}

// outgoingFrom makes this node (node1) the source of a migration to node2
// whose target is ready.
func outgoingFrom(o *Observation) {
	o.VMI.Labels[v1.MigrationTargetNodeNameLabel] = "node2"
	o.VMI.Status.MigrationState = &v1.VirtualMachineInstanceMigrationState{
		MigrationUID: migUID, SourceNode: "node1", TargetNode: "node2",
		TargetNodeAddress: "10.0.0.3:8187", TargetNodeDomainReadyTimestamp: &metav1.Time{Time: now}}
}

func sourceRec(state string) func(*Observation) {
	return func(o *Observation) {
		o.Record.Migration = &store.Migration{UID: migUID, Role: roleSource, State: state, Started: now}
		switch state {
		case migCompleted:
			o.Record.Migration.Completed, o.Record.Migration.Ended = true, now
		case migFailed:
			o.Record.Migration.Failed, o.Record.Migration.Ended, o.Record.Migration.Reason = true, now, "broken"
		}
	}
}

// sourceReportedState copies the record's fields into migrationState.
func sourceReportedState(o *Observation) {
	f := sourceFields(o.Record.Migration, o.VMI.Status.MigrationState.AbortRequested)
	ms := o.VMI.Status.MigrationState
	ms.StartTimestamp, ms.EndTimestamp, ms.Mode = f.StartTimestamp, f.EndTimestamp, f.Mode
	ms.Completed, ms.Failed, ms.FailureReason, ms.AbortStatus = f.Completed, f.Failed, f.FailureReason, f.AbortStatus
}

func TestPlan_MigrationSource(t *testing.T) {
	tests := []struct {
		name string
		o    *Observation
		want Plan
	}{{
		name: "TargetNotReady",
		o: obs(v1.Running, withQEMU, outgoingFrom, func(o *Observation) {
			o.VMI.Status.MigrationState.TargetNodeAddress = ""
		}),
		want: Plan{PatchStatus: true},
	}, {
		name: "Starts",
		o:    obs(v1.Running, withQEMU, outgoingFrom),
		want: Plan{Actions: []ActionKind{ActMigrateSource}, PatchStatus: true, Requeue: pollMigration},
	}, {
		name: "AbortBeforeStartDoesNotStart",
		o:    obs(v1.Running, withQEMU, outgoingFrom, func(o *Observation) { o.VMI.Status.MigrationState.AbortRequested = true }),
		want: Plan{PatchStatus: true},
	}, {
		name: "Follows",
		o:    obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migMigrating)),
		want: Plan{Actions: []ActionKind{ActMigrateSource}, PatchStatus: true, Requeue: pollMigration},
	}, {
		name: "CompletedReportsOnlyMigrationState",
		o:    obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migCompleted), runState("postmigrate")),
		want: Plan{Actions: []ActionKind{ActMigrateSource}},
	}, {
		name: "CompletedAndReportedWritesNothing",
		o: obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migCompleted), runState("postmigrate"),
			sourceReportedState, func(o *Observation) { o.Record.Intent.Paused = true }),
		want: Plan{},
	}, {
		name: "CompletedHandoffRefusedFailsTheVMI",
		o: obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migCompleted), runState("postmigrate"), sourceReportedState,
			func(o *Observation) { delete(o.VMI.Labels, v1.MigrationTargetNodeNameLabel) }),
		want: Plan{PatchStatus: true},
	}, {
		name: "CompletedThenAnotherMigrationNotStarted",
		o: obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migCompleted), runState("postmigrate"), func(o *Observation) {
			o.VMI.Status.MigrationState.MigrationUID = "a-later-migration"
		}),
		want: Plan{PatchStatus: true},
	}, {
		name: "FailedGuestRunsHere",
		o:    obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migFailed), sourceReportedState),
		want: Plan{PatchStatus: true},
	}, {
		name: "FailedResumesTheGuestItStopped",
		o: obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migFailed), sourceReportedState, runState("paused"), func(o *Observation) {
			o.Record.Migration.StoppedGuest = true
		}),
		want: Plan{Actions: []ActionKind{ActMigrateSource}, PatchStatus: true},
	}, {
		name: "OtherNodesMigrationIgnored",
		o: obs(v1.Running, withQEMU, outgoingFrom, func(o *Observation) {
			o.VMI.Status.MigrationState.SourceNode = "node7"
		}),
		want: Plan{PatchStatus: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, plan(tt.o)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSourceFields(t *testing.T) {
	start, end := metav1.NewTime(now), metav1.NewTime(now.Add(time.Second))
	tests := []struct {
		name  string
		m     store.Migration
		abort bool
		want  v1.VirtualMachineInstanceMigrationState
	}{
		{"Starting", store.Migration{State: migStarting}, false, v1.VirtualMachineInstanceMigrationState{}},
		{"Running", store.Migration{State: migMigrating, Started: now}, false,
			v1.VirtualMachineInstanceMigrationState{StartTimestamp: &start, Mode: v1.MigrationPreCopy}},
		{"Completed", store.Migration{State: migCompleted, Started: now, Ended: end.Time, Completed: true}, false,
			v1.VirtualMachineInstanceMigrationState{StartTimestamp: &start, EndTimestamp: &end, Mode: v1.MigrationPreCopy, Completed: true}},
		{"AbortTooLate", store.Migration{State: migCompleted, Started: now, Ended: end.Time, Completed: true}, true,
			v1.VirtualMachineInstanceMigrationState{StartTimestamp: &start, EndTimestamp: &end, Mode: v1.MigrationPreCopy,
				Completed: true, AbortStatus: v1.MigrationAbortFailed}},
		{"Aborting", store.Migration{State: migAborting, Started: now, Aborted: true}, true,
			v1.VirtualMachineInstanceMigrationState{StartTimestamp: &start, Mode: v1.MigrationPreCopy, AbortStatus: v1.MigrationAbortInProgress}},
		{"Aborted", store.Migration{State: migFailed, Started: now, Ended: end.Time, Failed: true, Aborted: true, Reason: "aborted"}, true,
			v1.VirtualMachineInstanceMigrationState{StartTimestamp: &start, EndTimestamp: &end, Mode: v1.MigrationPreCopy,
				Failed: true, FailureReason: "aborted", AbortStatus: v1.MigrationAbortSucceeded}},
		{"Paused", store.Migration{State: migMigrating, Started: now, Mode: string(v1.MigrationPaused)}, false,
			v1.VirtualMachineInstanceMigrationState{StartTimestamp: &start, Mode: v1.MigrationPaused}},
		{"FailedOnItsOwn", store.Migration{State: migFailed, Started: now, Ended: end.Time, Failed: true, Reason: "timeout"}, false,
			v1.VirtualMachineInstanceMigrationState{StartTimestamp: &start, EndTimestamp: &end, Mode: v1.MigrationPreCopy,
				Failed: true, FailureReason: "timeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := sourceFields(&tt.m, tt.abort)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("sourceFields (-want +got):\n%s", diff)
			}
			if !sourceReported(&got, got) {
				t.Errorf("sourceReported(x, x) = false")
			}
		})
	}
}

func TestPickPod(t *testing.T) {
	pod := func(uid string, phase corev1.PodPhase, mig string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: typesUID(uid), Labels: map[string]string{}}, Status: corev1.PodStatus{Phase: phase}}
		if mig != "" {
			p.Labels[v1.MigrationJobUIDLabel] = mig
		}
		return p
	}
	oldSource := pod("old", corev1.PodSucceeded, "")
	target := pod("tgt", corev1.PodRunning, migUID)
	other := pod("other", corev1.PodRunning, "m0")
	tests := []struct {
		name string
		o    *Observation
		pods []*corev1.Pod
		want string
	}{
		{"RecordsPod", obs(v1.Running, withRecord, func(o *Observation) { o.Record.PodUID = "old" }),
			[]*corev1.Pod{target, oldSource}, "old"},
		{"IncomingTargetPod", obs(v1.Running, incomingTo), []*corev1.Pod{oldSource, other, target}, "tgt"},
		{"IncomingWithoutItsPod", obs(v1.Running, incomingTo), []*corev1.Pod{oldSource, other}, ""},
		{"RunningOverCompleted", obs(v1.Running), []*corev1.Pod{oldSource, target}, "tgt"},
		{"TombstoneDoesNotPin", obs(v1.Running, incomingTo, withRecord, func(o *Observation) {
			o.Record.PodUID, o.Record.Gone = "old", now
		}), []*corev1.Pod{oldSource, target}, "tgt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if p := pickPod(tt.pods, tt.o); p != nil {
				got = string(p.UID)
			}
			if got != tt.want {
				t.Errorf("pickPod = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNotMigratable(t *testing.T) {
	kernel := obs(v1.Running).VMI
	kernel.Spec.Volumes = []v1.Volume{{Name: "ci", CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "x"}}}
	withDisks := kernel.DeepCopy()
	withDisks.Spec.Volumes = append(withDisks.Spec.Volumes,
		v1.Volume{Name: "root", ContainerDisk: &v1.ContainerDiskSource{Image: "img"}},
		v1.Volume{Name: "scratch", EmptyDisk: &v1.EmptyDiskSource{Capacity: resource.MustParse("1Gi")}})
	withPVC := kernel.DeepCopy()
	withPVC.Spec.Volumes = append(withPVC.Spec.Volumes, v1.Volume{Name: "data",
		PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}})
	claim := func(modes ...corev1.PersistentVolumeAccessMode) *v1.VirtualMachineInstance {
		v := withPVC.DeepCopy()
		v.Status.VolumeStatus = []v1.VolumeStatus{{Name: "data",
			PersistentVolumeClaimInfo: &v1.PersistentVolumeClaimInfo{ClaimName: "data", AccessModes: modes}}}
		return v
	}
	bridge := &store.Record{Interfaces: []store.Interface{{Name: "default", Binding: bindingBridge}}}
	masq := &store.Record{Interfaces: []store.Interface{{Name: "default", Binding: bindingMasquerade}}}
	tests := []struct {
		name   string
		vmi    *v1.VirtualMachineInstance
		rec    *store.Record
		reason string
	}{
		{"KernelBootCloudInitMasquerade", kernel, masq, ""},
		{"Bridge", kernel, bridge, v1.ReasonInterfaceNotLiveMigratable},
		{"BridgeNamedFirst", withDisks, bridge, v1.ReasonInterfaceNotLiveMigratable},
		{"LocalDisksMove", withDisks, masq, ""},
		{"PVCUnrecorded", withPVC, masq, v1.ReasonDisksNotLiveMigratable},
		{"PVCReadWriteOnce", claim(corev1.ReadWriteOnce), masq, v1.ReasonDisksNotLiveMigratable},
		{"PVCReadWriteMany", claim(corev1.ReadWriteOnce, corev1.ReadWriteMany), masq, ""},
		{"PVCSharedButBridge", claim(corev1.ReadWriteMany), bridge, v1.ReasonInterfaceNotLiveMigratable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, msg := notMigratable(tt.vmi, tt.rec)
			if reason != tt.reason || (reason != "") != (msg != "") {
				t.Errorf("notMigratable = %q, %q; want reason %q", reason, msg, tt.reason)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	vmi := obs(v1.Running).VMI
	mem := resource.MustParse("4Gi")
	vmi.Spec.Domain.Memory = &v1.Memory{Guest: &mem}
	c, p := timeouts(vmi, &v1.VirtualMachineInstanceMigrationState{})
	if c != 600*time.Second || p != 150*time.Second {
		t.Errorf("defaults for 4 GiB: completion %v progress %v, want 600s 150s", c, p)
	}
	small := resource.MustParse("256Mi")
	vmi.Spec.Domain.Memory.Guest = &small
	per, prog := int64(10), int64(5)
	c, p = timeouts(vmi, &v1.VirtualMachineInstanceMigrationState{MigrationConfiguration: &v1.MigrationConfiguration{
		CompletionTimeoutPerGiB: &per, ProgressTimeout: &prog}})
	if c != 10*time.Second || p != 5*time.Second {
		t.Errorf("256 MiB: completion %v progress %v, want at least one GiB's 10s, 5s", c, p)
	}
}

func typesUID(s string) types.UID { return types.UID(s) }
