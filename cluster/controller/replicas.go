package controller

import (
	"fmt"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kvlisters "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	poollisters "github.com/nodevirt/nodevirt/cluster/client/listers/pool/v1alpha1"
	"github.com/nodevirt/nodevirt/cluster/pool"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/cluster/replicaset"
)

// replicas builds the VirtualMachineInstanceReplicaSet (cluster/replicaset)
// and VirtualMachinePool (cluster/pool) loops on informers of their own
// kinds and the shared VM and VMI informers.
func (s *system) replicas(d Deps, inf informerSet, recorder record.EventRecorder, metrics *reconcile.Metrics) ([]*reconcile.Loop, error) {
	sets := s.kvFactory.Kubevirt().V1().VirtualMachineInstanceReplicaSets().Informer()
	pools := s.kvFactory.Pool().V1alpha1().VirtualMachinePools().Informer()
	for _, i := range []cache.SharedIndexInformer{sets, pools} {
		if err := i.SetTransform(reconcile.StripManagedFields); err != nil {
			return nil, fmt.Errorf("informer transform: %w", err)
		}
	}
	rs := replicaset.New(replicaset.Deps{
		ReplicaSets: kvlisters.NewVirtualMachineInstanceReplicaSetLister(sets.GetIndexer()),
		VMIs:        kvlisters.NewVirtualMachineInstanceLister(inf.vmis.GetIndexer()),
		Client:      d.Kubevirt.KubevirtV1(), Recorder: recorder,
	})
	rsLoop := reconcile.New("replicaset", rs, d.Log, metrics)
	vmp := pool.New(pool.Deps{
		Pools: poollisters.NewVirtualMachinePoolLister(pools.GetIndexer()),
		VMs:   kvlisters.NewVirtualMachineLister(inf.vms.GetIndexer()),
		VMIs:  kvlisters.NewVirtualMachineInstanceLister(inf.vmis.GetIndexer()),
		VMAPI: d.Kubevirt.KubevirtV1(), VMIAPI: d.Kubevirt.KubevirtV1(), PoolAPI: d.Kubevirt.PoolV1alpha1(), Recorder: recorder,
	})
	poolLoop := reconcile.New("pool", vmp, d.Log, metrics)
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{sets, rsLoop.Handler()}, {inf.vmis, rs.VMIHandler(rsLoop.EnqueueKey)},
		{pools, poolLoop.Handler()}, {inf.vms, vmp.VMHandler(poolLoop.EnqueueKey)}, {inf.vmis, vmp.VMIHandler(poolLoop.EnqueueKey)},
	} {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("add event handler: %w", err)
		}
	}
	return []*reconcile.Loop{rsLoop, poolLoop}, nil
}
