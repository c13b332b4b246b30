package controller

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvlisters "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	mlisters "github.com/nodevirt/nodevirt/cluster/client/listers/migrations/v1alpha1"
	"github.com/nodevirt/nodevirt/cluster/liveconfig"
	"github.com/nodevirt/nodevirt/cluster/migration"
	"github.com/nodevirt/nodevirt/cluster/node"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

// migrationLoops are the loops of cluster/migration: migrations (VMIM
// keys), disruption budgets (VMI keys) and evacuation (node names).
type migrationLoops struct {
	migrations, budgets, evacuation *reconcile.Loop
	forVMI                          func(vmiKey string)
	loops                           []*reconcile.Loop
}

func (s *system) migration(cfg Config, live *liveconfig.Store[Config], d Deps, inf informerSet, recorder record.EventRecorder, metrics *reconcile.Metrics, shapes *vmi.Shapes, accelerators *vmi.Accelerators) (*migrationLoops, error) {
	vmis := kvlisters.NewVirtualMachineInstanceLister(inf.vmis.GetIndexer())
	vmims := kvlisters.NewVirtualMachineInstanceMigrationLister(inf.vmims.GetIndexer())
	mcfg := cfg.migrationConfig()
	l := &migrationLoops{
		migrations: reconcile.New("migration", nil, d.Log, metrics),
		budgets: reconcile.New("disruption-budget", &migration.DisruptionBudgets{
			VMIs: vmis, PDBs: policylisters.NewPodDisruptionBudgetLister(inf.pdbs.GetIndexer()),
			API: d.Kube.PolicyV1(), Default: cfg.EvictionStrategy,
			LiveDefault: func() v1.EvictionStrategy { return live.Current().EvictionStrategy },
		}, d.Log, metrics),
		evacuation: reconcile.New("evacuation", nil, d.Log, metrics),
	}
	l.migrations.SetSyncer(migration.New(migration.Deps{
		Migrations: vmims, VMIs: vmis, Pods: inf.pods.GetIndexer(), PodAPI: d.Kube.CoreV1(),
		Client: d.Kubevirt.KubevirtV1(), Recorder: recorder, Queue: l.migrations,
		PodConfig: cfg.podConfig(), Shapes: shapes, Accelerators: accelerators, Config: mcfg,
		LivePodConfig: func() vmi.PodConfig { return live.Current().podConfig() },
		LiveConfig:    func() migration.Config { return live.Current().migrationConfig() },
		Policies: &migration.Policies{
			Policies:   mlisters.NewMigrationPolicyLister(inf.policies.GetIndexer()),
			Namespaces: corelisters.NewNamespaceLister(inf.namespaces.GetIndexer()),
		},
	}))
	l.evacuation.SetSyncer(&migration.Evacuation{
		Nodes: corelisters.NewNodeLister(inf.nodes.GetIndexer()), VMIsByNode: inf.vmis.GetIndexer(), NodeIndex: node.VMIsByNode,
		Migrations: vmims, Client: d.Kubevirt.KubevirtV1(), Queue: l.evacuation, Config: mcfg,
		Live: func() migration.Config { return live.Current().migrationConfig() },
	})
	l.forVMI = migration.EnqueueForVMI(inf.vmims.GetIndexer(), l.migrations.EnqueueKey)
	l.loops = []*reconcile.Loop{l.migrations, l.budgets, l.evacuation}
	return l, nil
}

// onVMI: a VMI change concerns its migrations, its disruption budget and
// the evacuation of its node.
func (l *migrationLoops) onVMI(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	vm, ok := obj.(*v1.VirtualMachineInstance)
	if !ok {
		return
	}
	key := vm.Namespace + "/" + vm.Name
	l.forVMI(key)
	l.budgets.EnqueueKey(key)
	if n := vm.Labels[v1.NodeNameLabel]; n != "" {
		l.evacuation.EnqueueKey(n)
	}
}

// onPod: a launcher pod change concerns its VMI's migrations.
func (l *migrationLoops) onPod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if p, ok := obj.(*corev1.Pod); ok {
		if key := migration.VMIKeyOfPod(p); key != "" {
			l.forVMI(key)
		}
	}
}

// onPDB: a changed or deleted budget is checked against its VMI.
func (l *migrationLoops) onPDB(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == v1.KindVMI {
		l.budgets.EnqueueKey(p.Namespace + "/" + ref.Name)
	}
}
