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

// snapshots builds the VirtualMachineSnapshot loop (cluster/snapshot) on
// informers of snapshots and their contents and the shared VM, VMI and
// PVC informers. CSI objects are read on demand (their API may come
// later than the controller).
func (s *system) snapshots(d Deps, inf informerSet, recorder record.EventRecorder, metrics *reconcile.Metrics) (*reconcile.Loop, error) {
	snaps := s.kvFactory.Snapshot().V1beta1().VirtualMachineSnapshots().Informer()
	contents := s.kvFactory.Snapshot().V1beta1().VirtualMachineSnapshotContents().Informer()
	for _, i := range []cache.SharedIndexInformer{snaps, contents} {
		if err := i.SetTransform(reconcile.StripManagedFields); err != nil {
			return nil, fmt.Errorf("informer transform: %w", err)
		}
	}
	loop := reconcile.New("snapshot", nil, d.Log, metrics)
	loop.SetSyncer(snapshot.New(snapshot.Deps{
		Snapshots: snaplisters.NewVirtualMachineSnapshotLister(snaps.GetIndexer()),
		Contents:  snaplisters.NewVirtualMachineSnapshotContentLister(contents.GetIndexer()),
		VMs:       kvlisters.NewVirtualMachineLister(inf.vms.GetIndexer()),
		VMIs:      kvlisters.NewVirtualMachineInstanceLister(inf.vmis.GetIndexer()),
		PVCs:      corelisters.NewPersistentVolumeClaimLister(inf.pvcs.GetIndexer()),
		API:       d.Kubevirt.SnapshotV1beta1(),
		CSI:       snapshot.ClusterCSI{Snapshots: d.CSISnapshots, Storage: d.Kube.StorageV1()},
		Freezer:   snapshot.SubresourceFreezer{REST: d.Kube.CoreV1().RESTClient()},
		Recorder:  recorder, Queue: loop,
	}))
	if _, err := snaps.AddEventHandler(loop.Handler()); err != nil {
		return nil, fmt.Errorf("add event handler: %w", err)
	}
	if _, err := contents.AddEventHandler(reconcile.HandlerFunc(func(obj any) {
		if key, ok := snapshot.SnapshotKeyOfContent(obj); ok {
			loop.EnqueueKey(key)
		}
	})); err != nil {
		return nil, fmt.Errorf("add event handler: %w", err)
	}
	return loop, nil
}
