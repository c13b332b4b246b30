package main

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	kvinformers "github.com/nodevirt/nodevirt/cluster/client/informers/externalversions"
	"github.com/nodevirt/nodevirt/cluster/operator"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
)

// operate runs the operator while this replica leads.
func operate(ctx context.Context, c config, rc *rest.Config, manifests map[string][]byte, log *slog.Logger) error {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	kv, err := versioned.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))

	strip := cache.TransformFunc(reconcile.StripManagedFields)
	own := kvinformers.NewSharedInformerFactoryWithOptions(kv, 0, kvinformers.WithNamespace(c.namespace), kvinformers.WithTransform(strip))
	cluster := kvinformers.NewSharedInformerFactoryWithOptions(kv, 0, kvinformers.WithTransform(strip))
	apps := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(c.namespace), informers.WithTransform(strip))
	kvs := own.Kubevirt().V1().KubeVirts()
	deps, dss := apps.Apps().V1().Deployments(), apps.Apps().V1().DaemonSets()
	vms, vmis := cluster.Kubevirt().V1().VirtualMachines(), cluster.Kubevirt().V1().VirtualMachineInstances()

	loop := reconcile.New("operator", nil, log, nil)
	op := operator.New(operator.Deps{
		KubeVirts: kvs.Lister(), Deployments: deps.Lister(), DaemonSets: dss.Lister(),
		VMs: vms.Lister(), VMIs: vmis.Lister(),
		Client: kv, Core: kube.CoreV1(), Dynamic: dyn, Mapper: mapper, Manifests: manifests, Own: c.own,
		Queue: loop, Log: log,
	})
	loop.SetSyncer(reconcile.SyncFunc(op.Sync))
	// Every KubeVirt of the namespace follows its workloads and, while
	// deleting, the cluster's VMs and VMIs.
	enqueueAll := func(any) {
		list, err := kvs.Lister().KubeVirts(c.namespace).List(labels.Everything())
		if err != nil {
			return
		}
		for _, k := range list {
			loop.Enqueue(k)
		}
	}
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{kvs.Informer(), loop.Handler()}, {deps.Informer(), reconcile.HandlerFunc(enqueueAll)}, {dss.Informer(), reconcile.HandlerFunc(enqueueAll)},
		{vms.Informer(), reconcile.HandlerFunc(enqueueAll)}, {vmis.Informer(), reconcile.HandlerFunc(enqueueAll)},
	} {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("event handler: %w", err)
		}
	}
	own.Start(ctx.Done())
	cluster.Start(ctx.Done())
	apps.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), kvs.Informer().HasSynced, deps.Informer().HasSynced, dss.Informer().HasSynced,
		vms.Informer().HasSynced, vmis.Informer().HasSynced) {
		return ctx.Err()
	}
	log.Info("operating", "namespace", c.namespace, "registry", c.own.Registry, "version", c.own.Tag)
	loop.Run(ctx, 1)
	return nil
}
