package migration

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvclient "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/typed/api/v1"
	listers "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

// Event reasons the migration controller records.
const (
	EventCreatedTargetPod = "SuccessfulCreate"
	EventFailedCreatePod  = "FailedCreate"
	EventSucceeded        = "Migrated"
	EventFailed           = "MigrationFailed"
)

// Enqueuer schedules a later sync of a key.
type Enqueuer interface {
	EnqueueAfter(key string, d time.Duration)
}

// PolicyResolver merges the MigrationPolicy matching a VMI (if any) over
// the cluster's migration configuration.
type PolicyResolver interface {
	Resolve(vmi *v1.VirtualMachineInstance, cluster v1.MigrationConfiguration) (v1.MigrationConfiguration, error)
}

// Deps are the migration controller's collaborators.
type Deps struct {
	Migrations listers.VirtualMachineInstanceMigrationLister
	VMIs       listers.VirtualMachineInstanceLister
	// Pods is the launcher pod informer's indexer, with vmi.PodIndexers.
	Pods     cache.Indexer
	PodAPI   corev1client.PodsGetter
	Client   kvclient.KubevirtV1Interface
	Recorder record.EventRecorder
	Queue    Enqueuer // may be nil in tests
	// Policies may be nil (no MigrationPolicies).
	Policies  PolicyResolver
	PodConfig vmi.PodConfig
	// LivePodConfig and LiveConfig, when set, are the configuration in
	// force, read for each migration instead of PodConfig and Config
	// (cluster/liveconfig).
	LivePodConfig func() vmi.PodConfig
	LiveConfig    func() Config
	// Shapes chooses each target pod's shape (nil: PodConfig.Shape).
	Shapes *vmi.Shapes
	// Accelerators gives each target pod its source's accelerator (nil:
	// PodConfig.Emulation).
	Accelerators *vmi.Accelerators
	Config       Config
	Now          func() time.Time
}

// Controller drives VirtualMachineInstanceMigrations.
type Controller struct{ d Deps }

// config is the configuration in force: LiveConfig's with defaults, else
// Config.
func (c *Controller) config() Config {
	if c.d.LiveConfig != nil {
		return c.d.LiveConfig().withDefaults()
	}
	return c.d.Config
}

// podConfig is the launcher pod configuration in force.
func (c *Controller) podConfig() vmi.PodConfig {
	if c.d.LivePodConfig != nil {
		return c.d.LivePodConfig()
	}
	return c.d.PodConfig
}

// New returns a migration controller.
func New(d Deps) *Controller {
	if d.Now == nil {
		d.Now = time.Now
	}
	d.Config = d.Config.withDefaults()
	return &Controller{d: d}
}

// Sync reconciles the VMIM named by key.
func (c *Controller) Sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return fmt.Errorf("vmim key %q: %w", key, err)
	}
	m, err := c.d.Migrations.VirtualMachineInstanceMigrations(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get vmim %s: %w", key, err)
	}
	o, err := c.observe(ctx, m)
	if err != nil {
		return err
	}
	res := Plan(o)
	if err := c.apply(ctx, o, res); err != nil {
		return err
	}
	if res.RequeueAfter > 0 && c.d.Queue != nil {
		c.d.Queue.EnqueueAfter(key, res.RequeueAfter)
	}
	return nil
}

func (c *Controller) observe(ctx context.Context, m *v1.VirtualMachineInstanceMigration) (Observed, error) {
	o := Observed{VMIM: m, Now: c.d.Now()}
	cfg := c.config()
	o.UnschedulableTimeout, o.PendingTimeout = podTimeouts(m, cfg)
	vm, err := c.d.VMIs.VirtualMachineInstances(m.Namespace).Get(m.Spec.VMIName)
	if apierrors.IsNotFound(err) {
		return o, nil
	}
	if err != nil {
		return o, fmt.Errorf("get vmi %s/%s: %w", m.Namespace, m.Spec.VMIName, err)
	}
	o.VMI = vm
	o.Migration = WithDefaults(cfg.Migrations)
	if c.d.Policies != nil {
		mc, err := c.d.Policies.Resolve(vm, cfg.Migrations)
		if err != nil {
			return o, err
		}
		o.Migration = WithDefaults(mc)
	}
	pods, err := c.pods(m.Namespace + "/" + vm.Name)
	if err != nil {
		return o, err
	}
	o.SourcePod = vmi.CurrentPod(pods, vm)
	for _, p := range pods {
		if p.Labels[v1.MigrationJobUIDLabel] == string(m.UID) && p.Labels[v1.CreatedByLabel] == string(vm.UID) {
			o.TargetPod = p
		}
	}
	if o.TargetPod == nil && isActive(m.Status.Phase) {
		// A pod created in the last sync may not be in the cache yet.
		p, err := c.d.PodAPI.Pods(m.Namespace).Get(ctx, targetPodName(vm.Name, string(m.UID)), getOpts)
		switch {
		case err == nil && p.Labels[v1.MigrationJobUIDLabel] == string(m.UID):
			o.TargetPod = p
		case err != nil && !apierrors.IsNotFound(err):
			return o, fmt.Errorf("get target pod of vmim %s/%s: %w", m.Namespace, m.Name, err)
		}
	}
	if m.Status.Phase == v1.MigrationPending || m.Status.Phase == v1.MigrationPhaseUnset {
		o.Wait, err = c.wait(m, vm)
	}
	return o, err
}

// wait applies the one-migration-per-VMI rule and the parallel limits.
func (c *Controller) wait(m *v1.VirtualMachineInstanceMigration, vm *v1.VirtualMachineInstance) (string, error) {
	all, err := c.d.Migrations.List(labels.Everything())
	if err != nil {
		return "", fmt.Errorf("list vmims: %w", err)
	}
	self := slot{UID: string(m.UID), Name: m.Name, VMI: m.Namespace + "/" + vm.Name, Source: vm.Status.NodeName,
		Phase: m.Status.Phase, Created: m.CreationTimestamp.Time}
	others := make([]slot, 0, len(all))
	for _, x := range all {
		s := slot{UID: string(x.UID), Name: x.Name, VMI: x.Namespace + "/" + x.Spec.VMIName, Phase: x.Status.Phase, Created: x.CreationTimestamp.Time}
		if ms := x.Status.MigrationState; ms != nil && ms.SourceNode != "" {
			s.Source = ms.SourceNode
		} else if other, err := c.d.VMIs.VirtualMachineInstances(x.Namespace).Get(x.Spec.VMIName); err == nil {
			s.Source = other.Status.NodeName
		}
		others = append(others, s)
	}
	lim := c.config().Migrations
	return admit(self, others, *lim.ParallelMigrationsPerCluster, *lim.ParallelOutboundMigrationsPerNode), nil
}

func (c *Controller) pods(key string) ([]*corev1.Pod, error) {
	objs, err := c.d.Pods.ByIndex(vmi.PodsByVMI, key)
	if err != nil {
		return nil, fmt.Errorf("launcher pods of vmi %s: %w", key, err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}
