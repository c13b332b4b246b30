package v1_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
	"github.com/nodevirt/nodevirt/hack/testenv/apiserver"
)

// TestStatusOwnership runs against a real kube-apiserver with the generated
// CRDs: the API server enforces the phase transition table, and writers of
// different conditions never undo each other.
func TestStatusOwnership(t *testing.T) {
	env := apiserver.Start(t)
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	client, err := versioned.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := "ownership"
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vmis := client.KubevirtV1().VirtualMachineInstances(ns)
	t.Run("phase transitions", func(t *testing.T) { testPhaseTransitions(t, vmis) })
	t.Run("concurrent conditions", func(t *testing.T) { testConcurrentConditions(t, vmis) })
	t.Run("agent drops its condition", func(t *testing.T) { testAgentDropsCondition(t, vmis) })
	t.Run("upgrade from merge patches", func(t *testing.T) { testUpgradeFromMergePatches(t, vmis) })
	t.Run("agent takeover", func(t *testing.T) { testTakeover(t, vmis) })
}

// testTakeover: the agent takes a VMI over from Scheduling straight to
// Running with the node, the active pod and the Scheduled timestamp; the
// controller's Scheduled from the same view conflicts; the agent's later
// applies keep what it took over; a migration's handoff still replaces
// the active pods and the node.
func testTakeover(t *testing.T, vmis kvclient.VirtualMachineInstanceInterface) {
	ctx := t.Context()
	at := metav1.Now()
	ts := func(phases ...v1.VirtualMachineInstancePhase) []v1.VirtualMachineInstancePhaseTransitionTimestamp {
		var out []v1.VirtualMachineInstancePhaseTransitionTimestamp
		for _, p := range phases {
			out = append(out, v1.VirtualMachineInstancePhaseTransitionTimestamp{Phase: p, PhaseTransitionTimestamp: at})
		}
		return out
	}
	vmi := newVMI(t, vmis, "takeover")
	scheduling := v1.VirtualMachineInstanceStatus{Phase: v1.Scheduling, PhaseTransitionTimestamps: ts(v1.Pending, v1.Scheduling)}
	vmi, err := v1.ApplyStatusResult(ctx, vmis, vmi, scheduling, v1.ManagerController)
	if err != nil {
		t.Fatal(err)
	}
	taken := v1.VirtualMachineInstanceStatus{
		Phase: v1.Running, NodeName: "n1", ActivePods: map[string]string{"pod1": "n1"},
		PhaseTransitionTimestamps: ts(v1.Pending, v1.Scheduling, v1.Scheduled, v1.Running),
		Conditions:                []v1.VirtualMachineInstanceCondition{condition(v1.VirtualMachineInstanceReady, true, "")},
	}
	got, err := v1.ApplyStatusResult(ctx, vmis, vmi, taken, v1.ManagerAgent)
	if err != nil {
		t.Fatalf("takeover Scheduling → Running refused: %v", err)
	}
	scheduled := scheduling.DeepCopy()
	scheduled.Phase, scheduled.NodeName, scheduled.ActivePods = v1.Scheduled, "n1", map[string]string{"pod1": "n1"}
	scheduled.PhaseTransitionTimestamps = ts(v1.Pending, v1.Scheduling, v1.Scheduled)
	if err := apply(ctx, vmis, vmi, *scheduled, v1.ManagerController); !apierrors.IsConflict(err) {
		t.Errorf("the controller's Scheduled from before the takeover: err = %v, want Conflict", err)
	}

	// The agent pauses the guest: an apply from what it read.
	paused := *got.Status.DeepCopy()
	paused.Conditions = []v1.VirtualMachineInstanceCondition{
		condition(v1.VirtualMachineInstanceReady, false, v1.ReasonGuestNotRunning),
		condition(v1.VirtualMachineInstancePaused, true, v1.ReasonPausedByUser),
	}
	if got, err = v1.ApplyStatusResult(ctx, vmis, got, paused, v1.ManagerAgent); err != nil {
		t.Fatal(err)
	}
	wantTaken := func(step string, node string, pods map[string]string) {
		t.Helper()
		phases := map[v1.VirtualMachineInstancePhase]bool{}
		for _, p := range got.Status.PhaseTransitionTimestamps {
			phases[p.Phase] = true
		}
		if got.Status.Phase != v1.Running || got.Status.NodeName != node || !maps.Equal(got.Status.ActivePods, pods) ||
			!phases[v1.Pending] || !phases[v1.Scheduling] || !phases[v1.Scheduled] || !phases[v1.Running] {
			t.Errorf("%s: phase %q on %q, activePods %v, transitions %v; want Running on %s with %v and Pending…Running",
				step, got.Status.Phase, got.Status.NodeName, got.Status.ActivePods, got.Status.PhaseTransitionTimestamps, node, pods)
		}
	}
	wantTaken("after the agent's next apply", "n1", map[string]string{"pod1": "n1"})

	// A migration: the migration controller adds the target pod, the
	// agent applies again from what it read, the handoff names the target.
	mig := v1.VirtualMachineInstanceStatus{NodeName: "n1", ActivePods: map[string]string{"pod1": "n1", "pod2": "n2"}}
	if got, err = v1.ApplyStatusResult(ctx, vmis, got, mig, v1.ManagerMigrationController); err != nil {
		t.Fatal(err)
	}
	if got, err = v1.ApplyStatusResult(ctx, vmis, got, *got.Status.DeepCopy(), v1.ManagerAgent); err != nil {
		t.Fatal(err)
	}
	handoff := v1.VirtualMachineInstanceStatus{NodeName: "n2", ActivePods: map[string]string{"pod2": "n2"}}
	if got, err = v1.ApplyStatusResult(ctx, vmis, got, handoff, v1.ManagerMigrationController); err != nil {
		t.Fatal(err)
	}
	wantTaken("after the handoff", "n2", map[string]string{"pod2": "n2"})
}

func newVMI(t *testing.T, vmis kvclient.VirtualMachineInstanceInterface, name string) *v1.VirtualMachineInstance {
	t.Helper()
	mem := resource.MustParse("64Mi")
	vmi, err := vmis.Create(t.Context(), &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{Memory: &v1.Memory{Guest: &mem}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create vmi %s: %v", name, err)
	}
	return vmi
}

// pathTo is a list of allowed steps from "" to p.
func pathTo(p v1.VirtualMachineInstancePhase) []v1.VirtualMachineInstancePhase {
	type node struct {
		phase v1.VirtualMachineInstancePhase
		path  []v1.VirtualMachineInstancePhase
	}
	queue, seen := []node{{v1.VmPhaseUnset, nil}}, map[v1.VirtualMachineInstancePhase]bool{v1.VmPhaseUnset: true}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if n.phase == p {
			return n.path
		}
		for _, next := range allPhases {
			if !seen[next] && n.phase.CanTransitionTo(next) {
				seen[next] = true
				queue = append(queue, node{next, append(append([]v1.VirtualMachineInstancePhase{}, n.path...), next)})
			}
		}
	}
	return nil
}

func setPhase(ctx context.Context, vmis kvclient.VirtualMachineInstanceInterface, vmi *v1.VirtualMachineInstance, p v1.VirtualMachineInstancePhase) (*v1.VirtualMachineInstance, error) {
	vmi = vmi.DeepCopy()
	vmi.Status.Phase = p
	return vmis.UpdateStatus(ctx, vmi, metav1.UpdateOptions{FieldManager: "phase-test"})
}

// Every (from, to) pair of phases, unset included: the API server allows
// exactly what CanTransitionTo allows and names status.phase when it refuses.
func testPhaseTransitions(t *testing.T, vmis kvclient.VirtualMachineInstanceInterface) {
	for _, from := range allPhases {
		for _, to := range allPhases {
			name := fmt.Sprintf("%s-to-%s", phaseName(from), phaseName(to))
			t.Run(name, func(t *testing.T) {
				ctx := t.Context()
				vmi := newVMI(t, vmis, strings.ToLower(strings.NewReplacer("(", "", ")", "").Replace(name)))
				var err error
				for _, step := range pathTo(from) {
					if vmi, err = setPhase(ctx, vmis, vmi, step); err != nil {
						t.Fatalf("setting up phase %s (step %s): %v", from, step, err)
					}
				}
				_, err = setPhase(ctx, vmis, vmi, to)
				want := from.CanTransitionTo(to)
				switch {
				case want && err != nil:
					t.Fatalf("%s → %s is allowed by the table, refused by the API server: %v", phaseName(from), phaseName(to), err)
				case !want && err == nil:
					t.Fatalf("%s → %s is forbidden by the table, accepted by the API server", phaseName(from), phaseName(to))
				case !want && !apierrors.IsInvalid(err):
					t.Fatalf("%s → %s: want an Invalid error, got %v", phaseName(from), phaseName(to), err)
				case !want:
					msg := fmt.Sprintf("status.phase: transition from %s to %s is not allowed", phaseName(from), phaseName(to))
					if !strings.Contains(err.Error(), msg) {
						t.Errorf("error %q does not contain %q", err, msg)
					}
				}
			})
		}
	}
}

func phaseName(p v1.VirtualMachineInstancePhase) string {
	if p == v1.VmPhaseUnset {
		return "(unset)"
	}
	return string(p)
}

func apply(ctx context.Context, vmis kvclient.VirtualMachineInstanceInterface, vmi *v1.VirtualMachineInstance, s v1.VirtualMachineInstanceStatus, manager string) error {
	return v1.ApplyStatus(ctx, vmis, vmi, s, manager)
}

func condition(t v1.VirtualMachineInstanceConditionType, ok bool, reason string) v1.VirtualMachineInstanceCondition {
	s := corev1.ConditionFalse
	if ok {
		s = corev1.ConditionTrue
	}
	return v1.VirtualMachineInstanceCondition{Type: t, Status: s, Reason: reason}
}

func conditionsByType(vmi *v1.VirtualMachineInstance) map[v1.VirtualMachineInstanceConditionType]v1.VirtualMachineInstanceCondition {
	out := map[v1.VirtualMachineInstanceConditionType]v1.VirtualMachineInstanceCondition{}
	for _, c := range vmi.Status.Conditions {
		out[c.Type] = c
	}
	return out
}

// The agent (Ready) and the controller (Synchronized) apply their own
// condition at the same time, round after round: both always win.
func testConcurrentConditions(t *testing.T, vmis kvclient.VirtualMachineInstanceInterface) {
	const rounds, writesPerRound = 10, 5
	ctx := t.Context()
	created := newVMI(t, vmis, "concurrent")
	// No resourceVersion: the writers race without preconditions.
	target := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: created.Name, Namespace: created.Namespace}}
	for round := range rounds {
		reason := fmt.Sprintf("Round%d", round)
		var wg sync.WaitGroup
		errs := make(chan error, 2*writesPerRound)
		writers := []struct {
			manager string
			cond    v1.VirtualMachineInstanceConditionType
		}{
			{v1.ManagerAgent, v1.VirtualMachineInstanceReady},
			{v1.ManagerController, v1.VirtualMachineInstanceSynchronized},
		}
		for _, w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range writesPerRound {
					c := condition(w.cond, round%2 == 0, fmt.Sprintf("%s-%d", reason, i))
					if i == writesPerRound-1 {
						c.Reason = reason
					}
					s := v1.VirtualMachineInstanceStatus{Conditions: []v1.VirtualMachineInstanceCondition{c}}
					if err := apply(ctx, vmis, target, s, w.manager); err != nil {
						errs <- fmt.Errorf("%s: %w", w.manager, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		got, err := vmis.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds := conditionsByType(got)
		for _, w := range writers {
			if c, ok := conds[w.cond]; !ok || c.Reason != reason {
				t.Fatalf("round %d: %s's condition %s = %+v (present %v), want reason %s; all: %+v",
					round, w.manager, w.cond, c, ok, reason, got.Status.Conditions)
			}
		}
		if len(got.Status.Conditions) != 2 {
			t.Fatalf("round %d: conditions = %+v, want exactly Ready and Synchronized", round, got.Status.Conditions)
		}
	}
}

// A condition the agent stops reporting goes; the controller's stays; the
// resourceVersion in the body is a precondition.
func testAgentDropsCondition(t *testing.T, vmis kvclient.VirtualMachineInstanceInterface) {
	ctx := t.Context()
	vmi := newVMI(t, vmis, "drops")
	target := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: vmi.Name, Namespace: vmi.Namespace}}
	ctl := v1.VirtualMachineInstanceStatus{Conditions: []v1.VirtualMachineInstanceCondition{condition(v1.VirtualMachineInstanceSynchronized, false, "PvcNotFound")}}
	if err := apply(ctx, vmis, target, ctl, v1.ManagerController); err != nil {
		t.Fatal(err)
	}
	paused := v1.VirtualMachineInstanceStatus{Conditions: []v1.VirtualMachineInstanceCondition{
		condition(v1.VirtualMachineInstanceReady, false, v1.ReasonGuestNotRunning),
		condition(v1.VirtualMachineInstancePaused, true, v1.ReasonPausedByUser),
	}}
	if err := apply(ctx, vmis, target, paused, v1.ManagerAgent); err != nil {
		t.Fatal(err)
	}
	unpaused := v1.VirtualMachineInstanceStatus{Conditions: paused.Conditions[:1]}
	if err := apply(ctx, vmis, target, unpaused, v1.ManagerAgent); err != nil {
		t.Fatal(err)
	}
	got, err := vmis.Get(ctx, vmi.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds := conditionsByType(got)
	if _, ok := conds[v1.VirtualMachineInstancePaused]; ok {
		t.Errorf("Paused still present after the agent dropped it: %+v", got.Status.Conditions)
	}
	if _, ok := conds[v1.VirtualMachineInstanceSynchronized]; !ok {
		t.Errorf("the controller's Synchronized went with the agent's Paused: %+v", got.Status.Conditions)
	}
	stale := vmi.DeepCopy() // resourceVersion from before the writes above
	if err := apply(ctx, vmis, stale, paused, v1.ManagerAgent); !apierrors.IsConflict(err) {
		t.Errorf("apply with a stale resourceVersion: err = %v, want Conflict", err)
	}
}

// testUpgradeFromMergePatches is an agent upgraded from a release that wrote
// its status with merge patches (an Update entry under the same manager
// name): without StatusApplyUpgrade its first apply leaves the condition it
// omits in place; with it the condition goes.
func testUpgradeFromMergePatches(t *testing.T, vmis kvclient.VirtualMachineInstanceInterface) {
	ctx := t.Context()
	unpaused := v1.VirtualMachineInstanceStatus{Phase: v1.Running, Conditions: []v1.VirtualMachineInstanceCondition{
		condition(v1.VirtualMachineInstanceReady, true, ""),
	}}
	for _, upgrade := range []bool{false, true} {
		vmi := newVMI(t, vmis, fmt.Sprintf("upgraded-%t", upgrade))
		old := []byte(`{"status":{"phase":"Scheduled"}}`)
		if _, err := vmis.Patch(ctx, vmi.Name, types.MergePatchType, old, metav1.PatchOptions{FieldManager: v1.ManagerAgent}, "status"); err != nil {
			t.Fatal(err)
		}
		old = []byte(`{"status":{"phase":"Running","conditions":[` +
			`{"type":"Ready","status":"False","reason":"GuestNotRunning"},` +
			`{"type":"Paused","status":"True","reason":"PausedByUser"}]}}`)
		vmi, err := vmis.Patch(ctx, vmi.Name, types.MergePatchType, old, metav1.PatchOptions{FieldManager: v1.ManagerAgent}, "status")
		if err != nil {
			t.Fatal(err)
		}
		if upgrade {
			patch, err := v1.StatusApplyUpgrade(vmi, v1.ManagerAgent)
			if err != nil || patch == nil {
				t.Fatalf("StatusApplyUpgrade = %s, %v; want a patch", patch, err)
			}
			if vmi, err = vmis.Patch(ctx, vmi.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: v1.ManagerAgent}); err != nil {
				t.Fatal(err)
			}
			if again, err := v1.StatusApplyUpgrade(vmi, v1.ManagerAgent); err != nil || again != nil {
				t.Errorf("StatusApplyUpgrade after the upgrade = %s, %v; want nothing to do", again, err)
			}
		}
		if err := apply(ctx, vmis, vmi, unpaused, v1.ManagerAgent); err != nil {
			t.Fatal(err)
		}
		got, err := vmis.Get(ctx, vmi.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, paused := conditionsByType(got)[v1.VirtualMachineInstancePaused]
		if paused != !upgrade {
			t.Errorf("upgrade %t: Paused present after the apply = %t, want %t: %+v", upgrade, paused, !upgrade, got.Status.Conditions)
		}
	}
}
