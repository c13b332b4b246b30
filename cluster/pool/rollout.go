package pool

import (
	"encoding/json"
	"hash/fnv"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	poolv1 "github.com/nodevirt/nodevirt/cluster/api/pool/v1alpha1"
	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// A template change reaches the pool's VMs in two steps, as in KubeVirt
// v1.6 (docs/controller.md):
//
//  1. opportunistic: every VM made from an older template gets the
//     current one (labels, annotations and spec replaced, the revision
//     label set) at once; a VM's spec is only its next VMI's;
//  2. proactive: the VMI of an up-to-date VM that runs an older template
//     is deleted, and the VM's run strategy starts one from the current
//     template — VMs that are not Ready first, then the others while no
//     more than maxUnavailable up-to-date VMs are without a ready VMI.
//
// A revision names a template by its content: <pool>-<hash of
// virtualMachineTemplate>, as a Deployment's pod-template-hash does
// (KubeVirt keeps each revision in a ControllerRevision named
// <pool>-<generation> and compares their templates; a content hash makes
// the names differ exactly when the templates do, so no copy is stored).

// revisionHashLen is the hex digits of the template hash in a revision.
const revisionHashLen = 10

// Revision is the name of the pool's current template revision, a valid
// label value.
func Revision(p *poolv1.VirtualMachinePool) string {
	b, err := json.Marshal(p.Spec.VirtualMachineTemplate)
	if err != nil {
		b = []byte(err.Error()) // not reached: the template is plain data
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	sum := strconv.FormatUint(h.Sum64(), 16)
	sum = strings.Repeat("0", 16-len(sum)) + sum
	prefix := p.Name
	if max := 63 - 1 - revisionHashLen; len(prefix) > max {
		prefix = prefix[:max]
	}
	return prefix + "-" + sum[:revisionHashLen]
}

// RevisionLabel is a VMI's revision label to set (VMIs of VMs made before
// revisions existed).
type RevisionLabel struct {
	VMI      *v1.VirtualMachineInstance
	Revision string
}

// rollout is the update part of a plan.
type rollout struct {
	update  []*v1.VirtualMachine
	restart []*v1.VirtualMachineInstance
	relabel []RevisionLabel
}

// planRollout brings the pool's VMs (mine: owned, matched, none being
// created or deleted this sync) and their VMIs to the current template.
func planRollout(p *poolv1.VirtualMachinePool, mine []*v1.VirtualMachine, vmis map[string]*v1.VirtualMachineInstance) rollout {
	var r rollout
	rev := Revision(p)
	var current []*v1.VirtualMachine
	for _, vm := range mine {
		switch {
		case vm.DeletionTimestamp != nil:
		case vm.Labels[v1.VirtualMachinePoolRevisionName] != rev:
			r.update = append(r.update, updatedVM(p, vm, rev))
		default:
			current = append(current, vm)
		}
	}
	sort.Slice(current, func(i, j int) bool { return Index(current[i].Name) < Index(current[j].Name) })
	unavailable := 0
	var outdated []*v1.VirtualMachineInstance
	for _, vm := range current {
		vmi := vmis[vm.Name]
		if vmi != nil && !metav1.IsControlledBy(vmi, vm) {
			vmi = nil
		}
		if !vmiReady(vmi) {
			unavailable++
		}
		if vmi == nil || vmi.DeletionTimestamp != nil {
			continue
		}
		switch have := vmi.Labels[v1.VirtualMachinePoolRevisionName]; {
		case have == rev:
		case have == "":
			// Made before the pool kept revisions: which template it
			// runs is unknown, and restarting every such VMI at once
			// (KubeVirt's choice) would take a whole pool down on an
			// upgrade of nodevirt. It is taken as current.
			r.relabel = append(r.relabel, RevisionLabel{VMI: vmi, Revision: rev})
		case !vm.IsReady():
			r.restart = append(r.restart, vmi) // not serving anyway
		default:
			outdated = append(outdated, vmi)
		}
	}
	budget := maxUnavailable(p) - unavailable
	for _, vmi := range outdated {
		if budget <= 0 {
			break
		}
		r.restart = append(r.restart, vmi)
		budget--
	}
	return r
}

// updatedVM is vm made from the pool's current template: the template's
// labels and annotations, its spec, and the revision label on the VM and
// in its VMI template (KubeVirt's opportunistic update).
func updatedVM(p *poolv1.VirtualMachinePool, vm *v1.VirtualMachine, rev string) *v1.VirtualMachine {
	out := vm.DeepCopy()
	fresh := newVM(p, vm.Name, rev)
	out.Labels, out.Annotations, out.Spec = fresh.Labels, fresh.Annotations, fresh.Spec
	return out
}

// newVM renders the pool's VM name of revision rev.
func newVM(p *poolv1.VirtualMachinePool, name, rev string) *v1.VirtualMachine {
	t := p.Spec.VirtualMachineTemplate
	vm := &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       p.Namespace,
			Labels:          maps.Clone(t.ObjectMeta.Labels),
			Annotations:     maps.Clone(t.ObjectMeta.Annotations),
			OwnerReferences: []metav1.OwnerReference{OwnerRef(p)},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if vm.Labels == nil {
		vm.Labels = map[string]string{}
	}
	vm.Labels[v1.VirtualMachinePoolRevisionName] = rev
	if vm.Spec.Template != nil {
		if vm.Spec.Template.ObjectMeta.Labels == nil {
			vm.Spec.Template.ObjectMeta.Labels = map[string]string{}
		}
		vm.Spec.Template.ObjectMeta.Labels[v1.VirtualMachinePoolRevisionName] = rev
	}
	return vm
}

// maxUnavailable is spec.maxUnavailable as a count: an integer, or a
// percentage of the desired replicas rounded down; 100% when unset; at
// least 1 (KubeVirt's rule).
func maxUnavailable(p *poolv1.VirtualMachinePool) int {
	want := int(p.Spec.DesiredReplicas())
	n := want
	if mu := p.Spec.MaxUnavailable; mu != nil {
		switch mu.Type {
		case intstr.Int:
			n = int(mu.IntVal)
		case intstr.String:
			pct, err := strconv.Atoi(strings.TrimSuffix(mu.StrVal, "%"))
			if err != nil {
				pct = 100 // the API server refuses anything else
			}
			n = int(math.Floor(float64(want) * float64(pct) / 100))
		}
	}
	return max(n, 1)
}

// vmiReady reports a VMI Running with Ready True and not being deleted.
func vmiReady(vmi *v1.VirtualMachineInstance) bool {
	return vmi != nil && vmi.DeletionTimestamp == nil && vmi.Status.Phase == v1.Running && vmi.IsReady()
}
