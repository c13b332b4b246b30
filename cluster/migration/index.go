package migration

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// MigrationsByVMI is the name of the VMIM informer index mapping a VMIM to
// the namespace/name key of its VMI.
const MigrationsByVMI = "vmi"

// Indexers are the indexers the VMIM informer must carry.
func Indexers() cache.Indexers {
	return cache.Indexers{MigrationsByVMI: func(obj any) ([]string, error) {
		m, ok := obj.(*v1.VirtualMachineInstanceMigration)
		if !ok {
			return nil, fmt.Errorf("vmim index: unexpected %T", obj)
		}
		return []string{m.Namespace + "/" + m.Spec.VMIName}, nil
	}}
}

// EnqueueForVMI returns a function that enqueues, through enqueue, every
// VMIM of the VMI with namespace/name key vmiKey.
func EnqueueForVMI(vmims cache.Indexer, enqueue func(key string)) func(vmiKey string) {
	return func(vmiKey string) {
		objs, err := vmims.ByIndex(MigrationsByVMI, vmiKey)
		if err != nil {
			return
		}
		for _, o := range objs {
			if m, ok := o.(*v1.VirtualMachineInstanceMigration); ok {
				enqueue(m.Namespace + "/" + m.Name)
			}
		}
	}
}

// VMIKeyOfPod is the namespace/name key of a launcher pod's VMI ("" for
// other pods).
func VMIKeyOfPod(pod *corev1.Pod) string {
	if pod.Labels[v1.AppLabel] != v1.LauncherAppValue || pod.Annotations[v1.DomainAnnotation] == "" {
		return ""
	}
	return pod.Namespace + "/" + pod.Annotations[v1.DomainAnnotation]
}
