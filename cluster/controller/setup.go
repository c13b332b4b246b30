package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/certsigner"
	kvscheme "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/scheme"
	kvinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
	kvlisters "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	"github.com/nodevirt/nodevirt/cluster/instancetype"
	"github.com/nodevirt/nodevirt/cluster/liveconfig"
	"github.com/nodevirt/nodevirt/cluster/migration"
	"github.com/nodevirt/nodevirt/cluster/node"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/cluster/vm"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

// system is the leader's set of informers, controllers and loops.
type system struct {
	kvFactory   kvinformers.SharedInformerFactory
	kubeFactory informers.SharedInformerFactory
	podFactory  informers.SharedInformerFactory
	// caFactory watches the CA bundle ConfigMap (nil without a signer).
	caFactory informers.SharedInformerFactory
	// configFactory and kubeVirtFactory watch the configuration objects
	// in the controller's namespace (liveconfig).
	configFactory   informers.SharedInformerFactory
	kubeVirtFactory kvinformers.SharedInformerFactory
	// live is the configuration in force, refreshed once the caches
	// synced and on every change of the configuration objects.
	live        *liveconfig.Store[Config]
	broadcaster record.EventBroadcaster
	loops       []*reconcile.Loop
}

// informerSet are the informers the controllers share.
type informerSet struct {
	vms, vmis, vmims, pods, pvcs, nodes, pdbs cache.SharedIndexInformer
	policies, namespaces                      cache.SharedIndexInformer
}

// build wires the controllers; cfg is the configuration read at start-up
// from flags (the defaults live changes start from) and the configuration
// objects; ca (nil: no signer) signs node API certificates; imageVolumes
// is the API server's answer to vmi.ProbeImageVolumes.
func build(cfg, flags Config, d Deps, ca *certsigner.CA, imageVolumes bool) (*system, error) {
	s := &system{
		kvFactory:   kvinformers.NewSharedInformerFactory(d.Kubevirt, 0),
		kubeFactory: informers.NewSharedInformerFactory(d.Kube, 0),
		podFactory: informers.NewSharedInformerFactoryWithOptions(d.Kube, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = vmi.LauncherSelector })),
	}
	recorder, err := s.newRecorder(d)
	if err != nil {
		return nil, err
	}
	metrics, err := reconcile.NewMetrics(d.Registry)
	if err != nil {
		return nil, err
	}
	vmiMetrics, err := vmi.NewMetrics(d.Registry)
	if err != nil {
		return nil, err
	}
	inf, err := s.informers()
	if err != nil {
		return nil, err
	}
	pods := inf.pods.GetIndexer()
	nodes := corelisters.NewNodeLister(inf.nodes.GetIndexer())
	shapes := &vmi.Shapes{Mode: cfg.PodShape, APIKeeps: imageVolumes, Nodes: nodes}
	accelerators := &vmi.Accelerators{Nodes: nodes}
	live, err := s.liveConfig(cfg, flags, d, recorder)
	if err != nil {
		return nil, err
	}

	vmLoop := reconcile.New("vm", nil, d.Log, metrics)
	vmLoop.SetSyncer(vm.New(vm.Deps{
		VMs: kvlisters.NewVirtualMachineLister(inf.vms.GetIndexer()), VMIs: kvlisters.NewVirtualMachineInstanceLister(inf.vmis.GetIndexer()),
		Client: d.Kubevirt.KubevirtV1(), Recorder: recorder, Queue: vmLoop,
		Instancetypes: instancetype.New(instancetype.Deps{
			Client: d.Kubevirt.InstancetypeV1beta1(), Revisions: d.Kube.AppsV1(), Recorder: recorder,
		}),
	}))
	vmiLoop := reconcile.New("vmi", nil, d.Log, metrics)
	vmiCtl := vmi.New(vmi.Deps{
		VMIs: kvlisters.NewVirtualMachineInstanceLister(inf.vmis.GetIndexer()), Pods: pods,
		PVCs:   corelisters.NewPersistentVolumeClaimLister(inf.pvcs.GetIndexer()),
		PodAPI: d.Kube.CoreV1(), Client: d.Kubevirt.KubevirtV1(), Recorder: recorder, Queue: vmiLoop,
		Config: cfg.podConfig(), Live: func() vmi.PodConfig { return live.Current().podConfig() },
		Shapes: shapes, Accelerators: accelerators,
	})
	vmiLoop.SetSyncer(vmiCtl)
	nodeLoop := reconcile.New("node", nil, d.Log, metrics)
	nodeLoop.SetSyncer(node.New(node.Deps{
		Nodes: corelisters.NewNodeLister(inf.nodes.GetIndexer()), VMIs: inf.vmis.GetIndexer(),
		PodExists: func(v *v1.VirtualMachineInstance) bool { return launcherPodExists(pods, v) },
		NodeAPI:   d.Kube.CoreV1(), Client: d.Kubevirt.KubevirtV1(), Recorder: recorder, Queue: nodeLoop,
		Threshold: cfg.HeartbeatThreshold, Recheck: cfg.HeartbeatRecheck,
		LiveThreshold: func() time.Duration { return live.Current().HeartbeatThreshold },
	}))
	s.loops = []*reconcile.Loop{vmLoop, vmiLoop, nodeLoop}
	mig, err := s.migration(cfg, live, d, inf, recorder, metrics, shapes, accelerators)
	if err != nil {
		return nil, err
	}
	s.loops = append(s.loops, mig.loops...)
	replicaLoops, err := s.replicas(d, inf, recorder, metrics)
	if err != nil {
		return nil, err
	}
	s.loops = append(s.loops, replicaLoops...)
	snapLoops, err := s.snapshots(d, inf, recorder, metrics)
	if err != nil {
		return nil, err
	}
	s.loops = append(s.loops, snapLoops...)
	// What the configuration decides for existing objects (a VMI's
	// disruption budget, a node's evacuation and heartbeat verdict) is
	// looked at again when it changes.
	live.OnChange(func() {
		for _, o := range inf.vmis.GetStore().List() {
			mig.budgets.Enqueue(o)
		}
		for _, o := range inf.nodes.GetStore().List() {
			nodeLoop.Enqueue(o)
			mig.evacuation.Enqueue(o)
		}
	})
	if ca != nil {
		loops, err := s.signer(cfg, d, ca, metrics)
		if err != nil {
			return nil, err
		}
		s.loops = append(s.loops, loops...)
	}

	vmiHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { vmLoop.Enqueue(o); vmiLoop.Enqueue(o); mig.onVMI(o) },
		UpdateFunc: func(old, cur any) {
			vmLoop.Enqueue(cur)
			vmiLoop.Enqueue(cur)
			mig.onVMI(cur)
			o, ok1 := old.(*v1.VirtualMachineInstance)
			c, ok2 := cur.(*v1.VirtualMachineInstance)
			if ok1 && ok2 {
				vmiMetrics.ObservePhaseChange(o, c)
			}
		},
		DeleteFunc: func(o any) { vmLoop.Enqueue(o); vmiLoop.Enqueue(o); mig.onVMI(o) },
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{inf.vms, vmLoop.Handler()}, {inf.vmis, vmiHandler},
		{inf.pods, vmiCtl.PodHandler(vmiLoop.EnqueueKey)}, {inf.nodes, nodeLoop.Handler()},
		{inf.pods, reconcile.HandlerFunc(mig.onPod)}, {inf.nodes, mig.evacuation.Handler()},
		{inf.vmims, mig.migrations.Handler()}, {inf.pdbs, reconcile.HandlerFunc(mig.onPDB)},
	} {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("add event handler: %w", err)
		}
	}
	return s, nil
}

// signer builds the CSR signer and the CA bundle publisher
// (cluster/certsigner) on a cluster-wide CSR informer and an informer of
// the one bundle ConfigMap.
func (s *system) signer(cfg Config, d Deps, ca *certsigner.CA, metrics *reconcile.Metrics) ([]*reconcile.Loop, error) {
	s.caFactory = informers.NewSharedInformerFactoryWithOptions(d.Kube, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = certsigner.BundleSelector }))
	csrs := s.kubeFactory.Certificates().V1().CertificateSigningRequests()
	cms := s.caFactory.Core().V1().ConfigMaps()
	if err := errors.Join(csrs.Informer().SetTransform(reconcile.StripManagedFields), cms.Informer().SetTransform(reconcile.StripManagedFields)); err != nil {
		return nil, fmt.Errorf("informer transform: %w", err)
	}
	csrLoop := reconcile.New("csr", certsigner.New(certsigner.Deps{
		CSRs: csrs.Lister(), Client: d.Kube.CertificatesV1().CertificateSigningRequests(), CA: ca,
		Namespace: cfg.Namespace, Lifetime: cfg.CertLifetime,
	}), d.Log, metrics)
	bundle := certsigner.NewBundle(ca, cms.Lister().ConfigMaps(cfg.Namespace), d.Kube.CoreV1().ConfigMaps(cfg.Namespace))
	bundleLoop := reconcile.New("ca-bundle", bundle, d.Log, metrics)
	bundleLoop.EnqueueKey(bundle.Key(cfg.Namespace))
	if _, err := csrs.Informer().AddEventHandler(csrLoop.Handler()); err != nil {
		return nil, fmt.Errorf("add event handler: %w", err)
	}
	if _, err := cms.Informer().AddEventHandler(bundleLoop.Handler()); err != nil {
		return nil, fmt.Errorf("add event handler: %w", err)
	}
	return []*reconcile.Loop{csrLoop, bundleLoop}, nil
}

// newRecorder starts an event broadcaster to the API server and returns a
// recorder for the controllers.
func (s *system) newRecorder(d Deps) (record.EventRecorder, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), kvscheme.AddToScheme(scheme)); err != nil {
		return nil, fmt.Errorf("event scheme: %w", err)
	}
	s.broadcaster = record.NewBroadcaster()
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.Kube.CoreV1().Events("")})
	return s.broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "nodevirt-controller"}), nil
}

// informers creates the shared informers: managed fields stripped from
// every cached object, launcher pods indexed by VMI, VMIs by node.
func (s *system) informers() (informerSet, error) {
	inf := informerSet{
		vms:   s.kvFactory.Kubevirt().V1().VirtualMachines().Informer(),
		vmis:  s.kvFactory.Kubevirt().V1().VirtualMachineInstances().Informer(),
		vmims: s.kvFactory.Kubevirt().V1().VirtualMachineInstanceMigrations().Informer(),
		pdbs:  s.kubeFactory.Policy().V1().PodDisruptionBudgets().Informer(),
		// MigrationPolicies select VMIs by their namespace's labels too.
		policies:   s.kvFactory.Migrations().V1alpha1().MigrationPolicies().Informer(),
		namespaces: s.kubeFactory.Core().V1().Namespaces().Informer(),
		pods:       s.podFactory.Core().V1().Pods().Informer(),
		pvcs:       s.kubeFactory.Core().V1().PersistentVolumeClaims().Informer(),
		nodes:      s.kubeFactory.Core().V1().Nodes().Informer(),
	}
	for _, i := range []cache.SharedIndexInformer{inf.vms, inf.vmis, inf.vmims, inf.pvcs, inf.nodes, inf.pdbs, inf.policies, inf.namespaces} {
		if err := i.SetTransform(reconcile.StripManagedFields); err != nil {
			return inf, fmt.Errorf("informer transform: %w", err)
		}
	}
	if err := inf.pods.SetTransform(trimPod); err != nil {
		return inf, fmt.Errorf("informer transform: %w", err)
	}
	if err := errors.Join(inf.pods.AddIndexers(vmi.PodIndexers()), inf.vmis.AddIndexers(node.VMIIndexers()),
		inf.vmims.AddIndexers(migration.Indexers())); err != nil {
		return inf, fmt.Errorf("add indexers: %w", err)
	}
	return inf, nil
}

// liveConfig watches the ConfigMap and the KubeVirt resources of the
// controller's namespace and keeps the configuration in force (initially
// cfg) current: flags overridden by them (Config.withObjects).
func (s *system) liveConfig(cfg, flags Config, d Deps, recorder record.EventRecorder) (*liveconfig.Store[Config], error) {
	s.kubeVirtFactory = kvinformers.NewSharedInformerFactoryWithOptions(d.Kubevirt, 0, kvinformers.WithNamespace(cfg.Namespace))
	kvs := s.kubeVirtFactory.Kubevirt().V1().KubeVirts()
	deps := liveconfig.Deps[Config]{
		KubeVirts: kvs.Lister().KubeVirts(cfg.Namespace),
		Compute:   flags.withObjects, Recorder: recorder, Log: d.Log,
	}
	watched := []cache.SharedIndexInformer{kvs.Informer()}
	if cfg.ConfigMapName != "" {
		s.configFactory = informers.NewSharedInformerFactoryWithOptions(d.Kube, 0, informers.WithNamespace(cfg.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.ConfigMapName).String()
			}))
		cms := s.configFactory.Core().V1().ConfigMaps()
		deps.ConfigMapName, deps.ConfigMaps = cfg.ConfigMapName, cms.Lister().ConfigMaps(cfg.Namespace)
		watched = append(watched, cms.Informer())
	}
	deps.Synced = func() bool {
		for _, i := range watched {
			if !i.HasSynced() {
				return false
			}
		}
		return true
	}
	live := liveconfig.New(cfg, deps)
	s.live = live
	for _, i := range watched {
		if err := i.SetTransform(reconcile.StripManagedFields); err != nil {
			return nil, fmt.Errorf("informer transform: %w", err)
		}
		if _, err := i.AddEventHandler(live.Handler()); err != nil {
			return nil, fmt.Errorf("configuration informer: %w", err)
		}
	}
	return live, nil
}

// run starts the informers, waits for their caches and runs the loops until
// ctx ends.
func (s *system) run(ctx context.Context, workers int) error {
	defer s.broadcaster.Shutdown()
	factories := s.factories()
	for _, f := range factories {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	for _, f := range factories {
		for _, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return errors.New("informer caches did not sync")
			}
		}
	}
	// Changes between the start-up read and the caches' sync are in force
	// before the first sync of any controller.
	s.live.Refresh()
	var wg sync.WaitGroup
	for _, l := range s.loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Run(ctx, workers)
		}()
	}
	wg.Wait()
	return nil
}

// informerFactory is what run needs of client-go's and the generated
// informer factories.
type informerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
	WaitForCacheSync(stopCh <-chan struct{}) map[reflect.Type]bool
}

// factories are the system's informer factories.
func (s *system) factories() []informerFactory {
	out := []informerFactory{s.kvFactory, s.kubeFactory, s.podFactory, s.kubeVirtFactory}
	if s.caFactory != nil {
		out = append(out, s.caFactory)
	}
	if s.configFactory != nil {
		out = append(out, s.configFactory)
	}
	return out
}

// launcherPodExists reports whether the pod index holds a pod of vmi.
func launcherPodExists(pods cache.Indexer, v *v1.VirtualMachineInstance) bool {
	objs, err := pods.ByIndex(vmi.PodsByVMI, v.Namespace+"/"+v.Name)
	if err != nil {
		return true // unknown: do not fail the VMI on a cache error
	}
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Labels[v1.CreatedByLabel] == string(v.UID) {
			return true
		}
	}
	return false
}
