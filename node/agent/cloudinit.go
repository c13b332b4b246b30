package agent

import (
	"fmt"
	"io/fs"
	"os"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/cloudinit"
	"github.com/nodevirt/nodevirt/node/podfs"
)

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

// writeCloudInit writes every missing NoCloud ISO of the VMI into the pod's
// private emptyDir, owned by the QEMU user, reading secretRef data from the
// pod's secret volume on the host.
func writeCloudInit(vmi *v1.VirtualMachineInstance, pod podfs.Pod) error {
	for _, v := range cloudInitVolumes(vmi) {
		iso := pod.CloudInitISO(v)
		if _, err := os.Stat(iso); err == nil {
			continue
		}
		var secrets fs.FS
		if dir := pod.SecretDir(v); dirExists(dir) {
			secrets = os.DirFS(dir)
		}
		cfg, err := cloudinit.NewConfig(vmi, v, secrets)
		if err != nil {
			return err
		}
		if err := cloudinit.WriteFile(iso, cfg, qemuUID, qemuGID); err != nil {
			return fmt.Errorf("VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
		}
	}
	return nil
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
