package main

import (
	"context"
	"fmt"
	"log/slog"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
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
	meta, err := metadata.NewForConfig(rc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))

	strip := cache.TransformFunc(reconcile.StripManagedFields)
	own := kvinformers.NewSharedInformerFactoryWithOptions(kv, 0, kvinformers.WithNamespace(c.namespace), kvinformers.WithTransform(strip))
	// The cluster's VMs and VMIs by metadata only: the operator counts and
	// deletes them, and a VMI's status writes are none of its business.
	cluster := metadatainformer.NewSharedInformerFactory(meta, 0)
	apps := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(c.namespace), informers.WithTransform(strip))
	kvs := own.Kubevirt().V1().KubeVirts()
	deps, dss := apps.Apps().V1().Deployments(), apps.Apps().V1().DaemonSets()
	vms := cluster.ForResource(v1.SchemeGroupVersion.WithResource("virtualmachines"))
	vmis := cluster.ForResource(v1.SchemeGroupVersion.WithResource("virtualmachineinstances"))
	for _, inf := range []cache.SharedIndexInformer{vms.Informer(), vmis.Informer()} {
		if err := inf.SetTransform(strip); err != nil {
			return fmt.Errorf("informer transform: %w", err)
		}
	}

	loop := reconcile.New("operator", nil, log, nil)
	op := operator.New(operator.Deps{
		KubeVirts: kvs.Lister(), Deployments: deps.Lister(), DaemonSets: dss.Lister(),
		VMs: workloads{vms.Lister()}, VMIs: workloads{vmis.Lister()},
		Client: kv, Core: kube.CoreV1(), Dynamic: dyn, Mapper: mapper, Manifests: manifests, Own: c.own,
		Queue: loop, Log: log,
	})
	loop.SetSyncer(reconcile.SyncFunc(op.Sync))
	// Every KubeVirt of the namespace follows its workloads and, while
	// deleting, the cluster's VMs and VMIs: their count, which only a
	// creation or a deletion changes, and which only a KubeVirt being
	// deleted waits for (a VMI burst must not cost the operator a sync each).
	enqueue := func(deletingOnly bool) func(any) {
		return func(any) {
			list, err := kvs.Lister().KubeVirts(c.namespace).List(labels.Everything())
			if err != nil {
				return
			}
			for _, k := range list {
				if !deletingOnly || k.DeletionTimestamp != nil {
					loop.Enqueue(k)
				}
			}
		}
	}
	enqueueAll, enqueueDeleting := enqueue(false), enqueue(true)
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{kvs.Informer(), loop.Handler()}, {deps.Informer(), reconcile.HandlerFunc(enqueueAll)}, {dss.Informer(), reconcile.HandlerFunc(enqueueAll)},
		{vms.Informer(), countChanges(enqueueDeleting)}, {vmis.Informer(), countChanges(enqueueDeleting)},
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

// countChanges calls f when an object comes or goes, not on its updates.
func countChanges(f func(any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: f, DeleteFunc: f}
}

// workloads adapts a metadata informer's lister, which lists
// runtime.Objects, to the operator's WorkloadLister.
type workloads struct{ l cache.GenericLister }

func (w workloads) List(sel labels.Selector) ([]*metav1.PartialObjectMetadata, error) {
	objs, err := w.l.List(sel)
	if err != nil {
		return nil, err
	}
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			return nil, fmt.Errorf("metadata lister: unexpected %T", o)
		}
		out = append(out, m)
	}
	return out, nil
}
