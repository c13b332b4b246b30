package agent

import (
	"encoding/json"
	"fmt"
	"path"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// podPVCs is what a launcher pod says about its VMI's PVC volumes, by
// volume name: which are block devices (a volumeDevice in the pod's
// devices directory: what the kubelet attached is the truth) and the
// capacities of the filesystem-mode ones (the controller's annotation,
// v1.PVCCapacitiesAnnotation).
type podPVCs struct {
	block      map[string]bool
	capacities map[string]int64
}

func pvcsOfPod(pod *corev1.Pod) (podPVCs, error) {
	var p podPVCs
	if pod == nil {
		return p, nil
	}
	for _, c := range pod.Spec.Containers {
		for _, d := range c.VolumeDevices {
			if path.Dir(d.DevicePath) != launchspec.DefaultBlockDir {
				continue
			}
			if p.block == nil {
				p.block = map[string]bool{}
			}
			p.block[path.Base(d.DevicePath)] = true
		}
	}
	if raw, ok := pod.Annotations[v1.PVCCapacitiesAnnotation]; ok {
		if err := json.Unmarshal([]byte(raw), &p.capacities); err != nil {
			return podPVCs{}, fmt.Errorf("pod %s/%s: annotation %s: %w", pod.Namespace, pod.Name, v1.PVCCapacitiesAnnotation, err)
		}
	}
	return p, nil
}
