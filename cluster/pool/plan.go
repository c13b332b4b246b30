package pool

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	poolv1 "github.com/nodevirt/nodevirt/cluster/api/pool/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// BurstReplicas caps the creates or deletes of one sync.
const BurstReplicas = 250

// Observed is what a sync sees: the pool, every VM and VMI of its
// namespace (informer caches), whether earlier creates and deletes have
// all reached the cache, the time, and the randomness of a Random
// scale-in.
type Observed struct {
	Pool    *poolv1.VirtualMachinePool
	VMs     []*v1.VirtualMachine
	VMIs    []*v1.VirtualMachineInstance
	Settled bool
	Now     time.Time
	// Shuffle permutes n elements (rand.Shuffle's signature); a Random
	// scale-in deletes the first VMs of the shuffled list. Nil: no
	// shuffle (the VMs' order as observed).
	Shuffle func(n int, swap func(i, j int))
}

// Result is what a sync should do.
type Result struct {
	// Create are the names of the VMs to create, lowest index first.
	Create []string
	// Delete are the VMs to delete: random ones, or the highest indexes
	// first (DescendingOrder).
	Delete []*v1.VirtualMachine
	// Release are owned VMs the selector no longer matches.
	Release []*v1.VirtualMachine
	// Update are the pool's VMs made from an older template, as they are
	// to be written: the current template's labels, annotations and spec
	// (rollout.go).
	Update []*v1.VirtualMachine
	// Restart are VMIs of up-to-date VMs running an older template, to be
	// deleted (their VMs' run strategies start new ones), within
	// spec.maxUnavailable.
	Restart []*v1.VirtualMachineInstance
	// Relabel are VMIs to label with their VM's revision.
	Relabel []RevisionLabel
	// Status is the pool status to write, without ReplicaFailure.
	Status poolv1.VirtualMachinePoolStatus
}

// Plan decides a sync's actions and the pool's status. It is pure.
//
// The pool counts the VMs it controls (controller ownerReference with its
// UID) that its selector matches, including VMs being deleted (KubeVirt's
// rule: a VM that is going still takes its index until it is gone).
// Scale-out names new VMs <pool>-<i> with the lowest i no VM of the
// namespace uses; scale-in deletes VMs the pool's selection policy picks:
// at random (Random, the default) or the highest indexes first
// (DescendingOrder).
func Plan(o Observed) Result {
	p := o.Pool
	status := *p.Status.DeepCopy()
	selector, err := p.Spec.Selector.AsSelector()
	if err != nil || p.Spec.VirtualMachineTemplate == nil {
		return Result{Status: status}
	}
	var r Result
	var mine []*v1.VirtualMachine
	deleting := p.DeletionTimestamp != nil
	for _, vm := range o.VMs {
		ref := metav1.GetControllerOf(vm)
		if ref == nil || ref.UID != p.UID {
			continue
		}
		if !selector.Matches(labels.Set(vm.Labels)) && vm.DeletionTimestamp == nil {
			if !deleting {
				r.Release = append(r.Release, vm)
			}
			continue
		}
		mine = append(mine, vm)
	}
	if o.Settled && !p.Spec.Paused && !deleting {
		diff := len(mine) - int(p.Spec.DesiredReplicas())
		switch {
		case diff < 0:
			r.Create = freeNames(p.Name, o.VMs, min(-diff, BurstReplicas))
		case diff > 0:
			r.Delete = scaleIn(mine, min(diff, BurstReplicas), p.Spec.ScaleInPolicy(), o.Shuffle)
		default: // template changes roll out once the scale is stable, as in KubeVirt
			ro := planRollout(p, mine, vmisByName(o.VMIs))
			r.Update, r.Restart, r.Relabel = ro.update, ro.restart, ro.relabel
		}
	}
	status.Replicas = int32(len(mine))
	status.ReadyReplicas = int32(countReady(mine))
	status.LabelSelector = selector.String()
	status.Conditions = setPaused(status.Conditions, p.Spec.Paused, o.Now)
	r.Status = status
	return r
}

// scaleIn picks n VMs to delete in the order of policy. VMs already being
// deleted count toward n (they are on their way out) and are not deleted
// again.
func scaleIn(vms []*v1.VirtualMachine, n int, policy poolv1.VirtualMachinePoolBasePolicy, shuffle func(int, func(i, j int))) []*v1.VirtualMachine {
	var eligible []*v1.VirtualMachine
	for _, vm := range vms {
		if vm.DeletionTimestamp == nil {
			eligible = append(eligible, vm)
		}
	}
	n -= len(vms) - len(eligible)
	if n <= 0 {
		return nil
	}
	switch {
	case policy == poolv1.VirtualMachinePoolBasePolicyDescendingOrder:
		sort.SliceStable(eligible, func(i, j int) bool {
			return Index(eligible[i].Name) > Index(eligible[j].Name)
		})
	case shuffle != nil:
		shuffle(len(eligible), func(i, j int) { eligible[i], eligible[j] = eligible[j], eligible[i] })
	}
	return eligible[:min(n, len(eligible))]
}

// freeNames returns n names <pool>-<i>, the lowest i first, that no VM in
// vms has.
func freeNames(pool string, vms []*v1.VirtualMachine, n int) []string {
	used := map[string]bool{}
	for _, vm := range vms {
		used[vm.Name] = true
	}
	var out []string
	for i := 0; len(out) < n; i++ {
		if name := Name(pool, i); !used[name] {
			out = append(out, name)
		}
	}
	return out
}

// Name is the name of the pool's VM with index i.
func Name(pool string, i int) string { return fmt.Sprintf("%s-%d", pool, i) }

// Index is the index of a pool VM's name (the number after the last
// dash), -1 if it has none.
func Index(name string) int {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

func countReady(vms []*v1.VirtualMachine) int {
	n := 0
	for _, vm := range vms {
		if vm.IsReady() {
			n++
		}
	}
	return n
}

func vmisByName(vmis []*v1.VirtualMachineInstance) map[string]*v1.VirtualMachineInstance {
	m := make(map[string]*v1.VirtualMachineInstance, len(vmis))
	for _, vmi := range vmis {
		m[vmi.Name] = vmi
	}
	return m
}

func setPaused(conds []poolv1.VirtualMachinePoolCondition, paused bool, now time.Time) []poolv1.VirtualMachinePoolCondition {
	if !paused {
		return removeCondition(conds, poolv1.VirtualMachinePoolReplicaPaused)
	}
	return setCondition(conds, poolv1.VirtualMachinePoolCondition{
		Type: poolv1.VirtualMachinePoolReplicaPaused, Status: corev1.ConditionTrue,
		Reason: ReasonPaused, Message: "Pool controller is paused",
	}, now)
}

// setCondition puts c in place of the condition of its type, keeping the
// transition time when the status stays.
func setCondition(conds []poolv1.VirtualMachinePoolCondition, c poolv1.VirtualMachinePoolCondition, now time.Time) []poolv1.VirtualMachinePoolCondition {
	out := make([]poolv1.VirtualMachinePoolCondition, 0, len(conds)+1)
	c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	placed := false
	for _, old := range conds {
		if old.Type != c.Type {
			out = append(out, old)
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		out = append(out, c)
		placed = true
	}
	if !placed {
		out = append(out, c)
	}
	return out
}

func removeCondition(conds []poolv1.VirtualMachinePoolCondition, t poolv1.VirtualMachinePoolConditionType) []poolv1.VirtualMachinePoolCondition {
	var out []poolv1.VirtualMachinePoolCondition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}
