package migration

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	policyclient "k8s.io/client-go/kubernetes/typed/policy/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
)

// PDBPrefix starts the name of a VMI's PodDisruptionBudget (KubeVirt's
// spelling); a hash of the VMI's UID ends it, so that creating it twice (a
// lagging cache, a new leader) yields one budget: two budgets over one pod
// make the eviction API refuse it.
const PDBPrefix = "kubevirt-disruption-budget-"

// DisruptionBudgets keeps one PodDisruptionBudget per VMI that must not be
// evicted (eviction strategy LiveMigrate, LiveMigrateIfPossible while
// migratable, External): minAvailable 1 over the VMI's launcher pods
// (kubevirt.io/created-by=<VMI UID>), 2 while a migration has a target pod,
// so `kubectl drain` never evicts a running guest. The PDB is owned by the
// VMI; a completed source pod is not protected by it (the eviction API
// deletes terminal pods regardless of budgets).
type DisruptionBudgets struct {
	VMIs    listers.VirtualMachineInstanceLister
	PDBs    policylisters.PodDisruptionBudgetLister
	API     policyclient.PodDisruptionBudgetsGetter
	Default v1.EvictionStrategy
	// LiveDefault, when set, is the cluster default in force, read for
	// each sync instead of Default (cluster/liveconfig).
	LiveDefault func() v1.EvictionStrategy
}

// Sync reconciles the disruption budget of the VMI named by key.
func (b *DisruptionBudgets) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("vmi key %q: %w", key, err)
	}
	vm, err := b.VMIs.VirtualMachineInstances(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // the PDBs go with their owner
	}
	if err != nil {
		return fmt.Errorf("get vmi %s: %w", key, err)
	}
	have, err := b.PDBs.PodDisruptionBudgets(ns).List(labels.SelectorFromSet(labels.Set{v1.CreatedByLabel: string(vm.UID)}))
	if err != nil {
		return fmt.Errorf("list pdbs of vmi %s: %w", key, err)
	}
	def := b.Default
	if b.LiveDefault != nil {
		def = b.LiveDefault()
	}
	want := WantPDB(vm, def)
	api := b.API.PodDisruptionBudgets(ns)
	for i, p := range have {
		if want > 0 && i == 0 {
			if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != want {
				p = p.DeepCopy()
				p.Spec.MinAvailable = ptrInt(want)
				if _, err := api.Update(ctx, p, metav1.UpdateOptions{FieldManager: v1.ManagerMigrationController}); err != nil {
					return fmt.Errorf("update pdb %s/%s: %w", ns, p.Name, err)
				}
			}
			continue
		}
		if err := api.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pdb %s/%s: %w", ns, p.Name, err)
		}
	}
	if want == 0 || len(have) > 0 {
		return nil
	}
	_, err = api.Create(ctx, RenderPDB(vm, want), metav1.CreateOptions{FieldManager: v1.ManagerMigrationController})
	if err != nil && !apierrors.IsAlreadyExists(err) { // one exists: the cache shows it soon
		return fmt.Errorf("create pdb of vmi %s: %w", key, err)
	}
	return nil
}

// WantPDB is the minAvailable the VMI's budget should have (0: no budget).
// It is pure.
func WantPDB(vm *v1.VirtualMachineInstance, clusterDefault v1.EvictionStrategy) int {
	if vm.DeletionTimestamp != nil || vm.Status.Phase.IsFinal() {
		return 0
	}
	switch EvictionStrategy(vm, clusterDefault) {
	case v1.EvictionStrategyLiveMigrate, v1.EvictionStrategyExternal:
	case v1.EvictionStrategyLiveMigrateIfPossible:
		if ok, _, _ := liveMigratable(vm); !ok {
			return 0
		}
	default:
		return 0
	}
	if ms := vm.Status.MigrationState; ms != nil && ms.TargetPod != "" && !ms.Completed && !ms.Failed {
		return 2
	}
	if vm.Status.EvacuationNodeName != "" {
		// Being evacuated: its migration's target pod exists before the
		// VMI names it (the migration is still Scheduling). Counted from
		// the start, so that target pod turning Ready never frees the
		// source for the drain's next eviction (CI saw a drained guest
		// shut down that way).
		return 2
	}
	return 1
}

// RenderPDB renders a VMI's disruption budget.
func RenderPDB(vm *v1.VirtualMachineInstance, minAvailable int) *policyv1.PodDisruptionBudget {
	sel := map[string]string{v1.CreatedByLabel: string(vm.UID)}
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Name:            PDBPrefix + uidHash(vm),
			Namespace:       vm.Namespace,
			Labels:          sel,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vm, v1.SchemeGroupVersion.WithKind(v1.KindVMI))},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrInt(minAvailable),
			Selector:     &metav1.LabelSelector{MatchLabels: sel},
		},
	}
}

func ptrInt(n int) *intstr.IntOrString {
	v := intstr.FromInt32(int32(n))
	return &v
}
