package agent

import (
	"context"
	"fmt"
	"os"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/podfs"
)

// CloudInitWriter writes the NoCloud ISO of one cloudInitNoCloud volume to
// isoPath (on the host), reading secretRef data from secretDir (the pod's
// secret volume on the host), owned by uid:gid.
type CloudInitWriter interface {
	WriteISO(ctx context.Context, vmi *v1.VirtualMachineInstance, volume, isoPath, secretDir string, uid, gid int) error
}

// cloudInitVolumes returns the names of the VMI's cloudInitNoCloud volumes.
func cloudInitVolumes(vmi *v1.VirtualMachineInstance) []string {
	var out []string
	for _, v := range vmi.Spec.Volumes {
		if v.CloudInitNoCloud != nil {
			out = append(out, v.Name)
		}
	}
	return out
}

// needsCloudInit reports whether an ISO of the VMI is not written yet.
func needsCloudInit(vmi *v1.VirtualMachineInstance, pod podfs.Pod) bool {
	for _, v := range cloudInitVolumes(vmi) {
		if _, err := os.Stat(pod.CloudInitISO(v)); err != nil {
			return true
		}
	}
	return false
}

// writeCloudInit writes every missing ISO of the VMI.
func (a *Agent) writeCloudInit(ctx context.Context, vmi *v1.VirtualMachineInstance, pod podfs.Pod) error {
	if a.deps.CloudInit == nil {
		return fmt.Errorf("VMI %s/%s: cloudInitNoCloud is not supported by this agent (no writer)", vmi.Namespace, vmi.Name)
	}
	for _, v := range cloudInitVolumes(vmi) {
		iso := pod.CloudInitISO(v)
		if _, err := os.Stat(iso); err == nil {
			continue
		}
		if err := a.deps.CloudInit.WriteISO(ctx, vmi, v, iso, pod.SecretDir(v), qemuUID, qemuGID); err != nil {
			return fmt.Errorf("VMI %s/%s: cloud-init volume %q: %w", vmi.Namespace, vmi.Name, v, err)
		}
	}
	return nil
}
