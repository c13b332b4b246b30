package migration

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
)

// Evacuation names and timings.
const (
	// DrainTaint is KubeVirt's taint marking a node to evacuate.
	DrainTaint = "kubevirt.io/drain"
	// EvacuationAnnotation on a VMIM created by the evacuation loop names
	// the node it empties (KubeVirt's spelling).
	EvacuationAnnotation = "kubevirt.io/evacuationMigration"
	// EvacuationPrefix starts the names of evacuation VMIMs.
	EvacuationPrefix = "kubevirt-evacuation-"
	// evacuationRecheck is how often a cordoned node with VMIs left is
	// looked at again.
	evacuationRecheck = 3 * time.Second
	// evacuationBackoff: a VMI whose evacuation failed waits this long
	// before the next attempt.
	evacuationBackoff = 30 * time.Second
)

// Evacuation is KubeVirt's evacuation controller: for each cordoned node
// (spec.unschedulable or the kubevirt.io/drain taint) it marks the VMIs to
// move (status.evacuationNodeName) and creates VMIMs for them, within the
// parallel migration limits. Only VMIs with eviction strategy LiveMigrate,
// or LiveMigrateIfPossible while migratable, are moved.
type Evacuation struct {
	Nodes      corelisters.NodeLister
	VMIsByNode cache.Indexer // VMI informer indexer with node.VMIIndexers
	NodeIndex  string        // name of its by-node index
	Migrations listers.VirtualMachineInstanceMigrationLister
	Client     kvclient.KubevirtV1Interface
	Queue      Enqueuer
	Config     Config
	// Live, when set, is the configuration in force, read for each sync
	// instead of Config (cluster/liveconfig).
	Live func() Config
	Now  func() time.Time
}

// Sync evacuates the node named by key.
func (e *Evacuation) Sync(ctx context.Context, key string) error {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	node, err := e.Nodes.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", key, err)
	}
	objs, err := e.VMIsByNode.ByIndex(e.NodeIndex, node.Name)
	if err != nil {
		return fmt.Errorf("vmis of node %s: %w", node.Name, err)
	}
	all, err := e.Migrations.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list vmims: %w", err)
	}
	cfg := e.Config
	if e.Live != nil {
		cfg = e.Live()
	}
	cfg = cfg.withDefaults()
	cordoned := Cordoned(node)
	plan := PlanEvacuation(EvacuationInput{Node: node.Name, Cordoned: cordoned, VMIs: vmisOf(objs), Migrations: all,
		Default: cfg.EvictionStrategy, PerCluster: *cfg.Migrations.ParallelMigrationsPerCluster,
		PerNode: *cfg.Migrations.ParallelOutboundMigrationsPerNode, Now: now(), Backoff: evacuationBackoff})
	for _, vm := range plan.Mark {
		st := vm.Status.DeepCopy()
		st.EvacuationNodeName = node.Name
		if !cordoned {
			st.EvacuationNodeName = ""
		}
		if err := v1.ApplyStatus(ctx, e.Client.VirtualMachineInstances(vm.Namespace), vm, *st, v1.ManagerMigrationController); err != nil {
			return err
		}
	}
	for _, mig := range plan.Migrate {
		vm := mig.VMI
		m := &v1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Name: mig.Name, Namespace: vm.Namespace,
				Annotations: map[string]string{EvacuationAnnotation: node.Name}},
			Spec: v1.VirtualMachineInstanceMigrationSpec{VMIName: vm.Name},
		}
		_, err := e.Client.VirtualMachineInstanceMigrations(vm.Namespace).Create(ctx, m, metav1.CreateOptions{FieldManager: v1.ManagerMigrationController})
		if apierrors.IsAlreadyExists(err) {
			// This attempt exists; the cache shows it soon.
			plan.Pending = true
			continue
		}
		if err != nil {
			return fmt.Errorf("create evacuation vmim %s for vmi %s/%s: %w", mig.Name, vm.Namespace, vm.Name, err)
		}
	}
	if plan.Pending && e.Queue != nil {
		e.Queue.EnqueueAfter(key, evacuationRecheck)
	}
	return nil
}

// Cordoned reports whether a node is to be emptied.
func Cordoned(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return true
	}
	for _, t := range n.Spec.Taints {
		if t.Key == DrainTaint && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

func vmisOf(objs []any) []*v1.VirtualMachineInstance {
	out := make([]*v1.VirtualMachineInstance, 0, len(objs))
	for _, o := range objs {
		if vm, ok := o.(*v1.VirtualMachineInstance); ok {
			out = append(out, vm)
		}
	}
	return out
}
