package controller

import (
	"fmt"

	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	kvlisters "github.com/nodevirt/nodevirt/cluster/client/listers/api/v1"
	snaplisters "github.com/nodevirt/nodevirt/cluster/client/listers/snapshot/v1beta1"
	"github.com/nodevirt/nodevirt/cluster/reconcile"
	"github.com/nodevirt/nodevirt/cluster/snapshot"
)

// snapshots builds the VirtualMachineSnapshot and VirtualMachineRestore
// loops (cluster/snapshot) on informers of snapshots, contents and
// restores and the shared VM, VMI and PVC informers. CSI objects are read
// on demand (their API may come later than the controller).
func (s *system) snapshots(d Deps, inf informerSet, recorder record.EventRecorder, metrics *reconcile.Metrics) ([]*reconcile.Loop, error) {
	snaps := s.kvFactory.Snapshot().V1beta1().VirtualMachineSnapshots().Informer()
	contents := s.kvFactory.Snapshot().V1beta1().VirtualMachineSnapshotContents().Informer()
	restores := s.kvFactory.Snapshot().V1beta1().VirtualMachineRestores().Informer()
	for _, i := range []cache.SharedIndexInformer{snaps, contents, restores} {
		if err := i.SetTransform(reconcile.StripManagedFields); err != nil {
			return nil, fmt.Errorf("informer transform: %w", err)
		}
	}
	loop := reconcile.New("snapshot", nil, d.Log, metrics)
	restoreLoop := reconcile.New("restore", nil, d.Log, metrics)
	deps := snapshot.Deps{
		Snapshots: snaplisters.NewVirtualMachineSnapshotLister(snaps.GetIndexer()),
		Contents:  snaplisters.NewVirtualMachineSnapshotContentLister(contents.GetIndexer()),
		VMs:       kvlisters.NewVirtualMachineLister(inf.vms.GetIndexer()),
		VMIs:      kvlisters.NewVirtualMachineInstanceLister(inf.vmis.GetIndexer()),
		PVCs:      corelisters.NewPersistentVolumeClaimLister(inf.pvcs.GetIndexer()),
		API:       d.Kubevirt.SnapshotV1beta1(),
		VMAPI:     d.Kubevirt.KubevirtV1(),
		CSI:       snapshot.ClusterCSI{Snapshots: d.CSISnapshots, Storage: d.Kube.StorageV1()},
		Freezer:   snapshot.SubresourceFreezer{REST: d.Kube.CoreV1().RESTClient()},
		Recorder:  recorder,
		Queue:     loop,
	}
	loop.SetSyncer(snapshot.New(deps))
	deps.Queue = restoreLoop
	restoreLoop.SetSyncer(snapshot.NewRestorer(deps, snapshot.RestoreDeps{
		Restores: snaplisters.NewVirtualMachineRestoreLister(restores.GetIndexer()),
		PVCAPI:   d.Kube.CoreV1(),
	}))
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{snaps, loop.Handler()},
		{contents, reconcile.HandlerFunc(func(obj any) {
			if key, ok := snapshot.SnapshotKeyOfContent(obj); ok {
				loop.EnqueueKey(key)
			}
		})},
		{restores, restoreLoop.Handler()},
	} {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("add event handler: %w", err)
		}
	}
	return []*reconcile.Loop{loop, restoreLoop}, nil
}
