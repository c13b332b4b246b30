package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	kvscheme "github.com/nodevirt/nodevirt/cluster/client/clientset/versioned/scheme"
	kvinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
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
	broadcaster record.EventBroadcaster
	loops       []*reconcile.Loop
}

func build(cfg Config, d Deps) (*system, error) {
	s := &system{
		kvFactory:   kvinformers.NewSharedInformerFactory(d.Kubevirt, 0),
		kubeFactory: informers.NewSharedInformerFactory(d.Kube, 0),
		podFactory: informers.NewSharedInformerFactoryWithOptions(d.Kube, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = vmi.LauncherSelector })),
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), kvscheme.AddToScheme(scheme)); err != nil {
		return nil, fmt.Errorf("event scheme: %w", err)
	}
	s.broadcaster = record.NewBroadcaster()
	recorder := s.broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "nodevirt-controller"})
	s.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: d.Kube.CoreV1().Events("")})

	metrics, err := reconcile.NewMetrics(d.Registry)
	if err != nil {
		return nil, err
	}
	vmiMetrics, err := vmi.NewMetrics(d.Registry)
	if err != nil {
		return nil, err
	}

	vmInf := s.kvFactory.Kubevirt().V1().VirtualMachines()
	vmiInf := s.kvFactory.Kubevirt().V1().VirtualMachineInstances()
	podInf := s.podFactory.Core().V1().Pods()
	pvcInf := s.kubeFactory.Core().V1().PersistentVolumeClaims()
	nodeInf := s.kubeFactory.Core().V1().Nodes()
	for _, inf := range []cache.SharedIndexInformer{vmInf.Informer(), vmiInf.Informer(), podInf.Informer(), pvcInf.Informer(), nodeInf.Informer()} {
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(podInf.Informer().AddIndexers(vmi.PodIndexers()), vmiInf.Informer().AddIndexers(node.VMIIndexers())); err != nil {
		return nil, fmt.Errorf("add indexers: %w", err)
	}

	vmLoop := reconcile.New("vm", nil, d.Log, metrics)
	vmCtl := vm.New(vm.Deps{
		VMs: vmInf.Lister(), VMIs: vmiInf.Lister(), Client: d.Kubevirt.KubevirtV1(),
		Recorder: recorder, Queue: vmLoop,
	})
	vmLoop.SetSyncer(vmCtl)

	vmiLoop := reconcile.New("vmi", nil, d.Log, metrics)
	pods := podInf.Informer().GetIndexer()
	vmiCtl := vmi.New(vmi.Deps{
		VMIs: vmiInf.Lister(), Pods: pods, PVCs: pvcInf.Lister(),
		PodAPI: d.Kube.CoreV1(), Client: d.Kubevirt.KubevirtV1(), Recorder: recorder, Queue: vmiLoop,
		Config: vmi.PodConfig{LauncherImage: cfg.LauncherImage, Emulation: cfg.Emulation},
	})
	vmiLoop.SetSyncer(vmiCtl)

	nodeLoop := reconcile.New("node", nil, d.Log, metrics)
	nodeCtl := node.New(node.Deps{
		Nodes: nodeInf.Lister(), VMIs: vmiInf.Informer().GetIndexer(),
		PodExists: func(v *v1.VirtualMachineInstance) bool { return launcherPodExists(pods, v) },
		NodeAPI:   d.Kube.CoreV1(), Client: d.Kubevirt.KubevirtV1(), Recorder: recorder, Queue: nodeLoop,
		Threshold: cfg.HeartbeatThreshold, Recheck: cfg.HeartbeatRecheck,
	})
	nodeLoop.SetSyncer(nodeCtl)

	_, err = vmInf.Informer().AddEventHandler(vmLoop.Handler())
	if err == nil {
		_, err = vmiInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { vmLoop.Enqueue(o); vmiLoop.Enqueue(o) },
			UpdateFunc: func(old, cur any) {
				vmLoop.Enqueue(cur)
				vmiLoop.Enqueue(cur)
				o, ok1 := old.(*v1.VirtualMachineInstance)
				c, ok2 := cur.(*v1.VirtualMachineInstance)
				if ok1 && ok2 {
					vmiMetrics.ObservePhaseChange(o, c)
				}
			},
			DeleteFunc: func(o any) { vmLoop.Enqueue(o); vmiLoop.Enqueue(o) },
		})
	}
	if err == nil {
		_, err = podInf.Informer().AddEventHandler(vmiCtl.PodHandler(vmiLoop.EnqueueKey))
	}
	if err == nil {
		_, err = nodeInf.Informer().AddEventHandler(nodeLoop.Handler())
	}
	if err != nil {
		return nil, fmt.Errorf("add event handlers: %w", err)
	}
	s.loops = []*reconcile.Loop{vmLoop, vmiLoop, nodeLoop}
	return s, nil
}

// run starts the informers, waits for their caches and runs the loops until
// ctx ends.
func (s *system) run(ctx context.Context, workers int) error {
	defer s.broadcaster.Shutdown()
	s.kvFactory.Start(ctx.Done())
	s.kubeFactory.Start(ctx.Done())
	s.podFactory.Start(ctx.Done())
	defer s.kvFactory.Shutdown()
	defer s.kubeFactory.Shutdown()
	defer s.podFactory.Shutdown()
	if !cacheSynced(ctx, s) {
		return errors.New("informer caches did not sync")
	}
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

func cacheSynced(ctx context.Context, s *system) bool {
	for _, ok := range s.kvFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return false
		}
	}
	for _, ok := range s.kubeFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return false
		}
	}
	for _, ok := range s.podFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return false
		}
	}
	return true
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

// stripManagedFields drops metadata.managedFields from cached objects: the
// controllers never read them and they are a large part of each object.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
