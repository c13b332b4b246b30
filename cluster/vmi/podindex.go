package vmi

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// PodsByVMI is the name of the pod informer index mapping a launcher pod to
// the namespace/name key of its VMI (from the kubevirt.io/domain annotation).
const PodsByVMI = "vmi"

// PodIndexers are the indexers the launcher pod informer must carry.
func PodIndexers() cache.Indexers {
	return cache.Indexers{PodsByVMI: func(obj any) ([]string, error) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, fmt.Errorf("pod index: unexpected %T", obj)
		}
		if key := VMIKeyOfPod(pod); key != "" {
			return []string{key}, nil
		}
		return nil, nil
	}}
}

// VMIKeyOfPod is the namespace/name key of the VMI a launcher pod belongs
// to, or "" for other pods.
func VMIKeyOfPod(pod *corev1.Pod) string {
	if pod.Labels[v1.AppLabel] != v1.LauncherAppValue {
		return ""
	}
	name := pod.Annotations[v1.DomainAnnotation]
	if name == "" {
		return ""
	}
	return pod.Namespace + "/" + name
}

// LauncherSelector selects launcher pods (for the filtered pod informer).
const LauncherSelector = v1.AppLabel + "=" + v1.LauncherAppValue
