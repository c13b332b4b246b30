package podfs

import (
	"fmt"
	"path/filepath"
	"strings"
)

// DefaultKubeletRoot is the kubelet's root directory on a standard node.
const DefaultKubeletRoot = "/var/lib/kubelet"

// Names of the pod's emptyDir volumes and of the files in them, as fixed by
// the launcher pod contract.
const (
	SocketsVolume = "sockets"
	PrivateVolume = "private"

	LauncherSocket = "launcher.sock"
	QMPSocket      = "qmp.sock"
	GuestAgentSock = "qga.sock"
	SerialSocket   = "serial.sock"
	VNCSocket      = "vnc.sock"
	ExitFile       = "qemu-exit.json"
	RunningFile    = "qemu-running.json"
)

// Pod is one launcher pod's directory under the kubelet root.
type Pod struct {
	KubeletRoot string
	UID         string
}

// New returns the Pod for podUID under kubeletRoot. The UID must be a
// single path element, so that a hostile object cannot point the agent
// outside the kubelet's pods directory.
func New(kubeletRoot, podUID string) (Pod, error) {
	if podUID == "" || podUID == "." || podUID == ".." || strings.ContainsRune(podUID, '/') {
		return Pod{}, fmt.Errorf("pod UID %q is not a path element", podUID)
	}
	if kubeletRoot == "" {
		kubeletRoot = DefaultKubeletRoot
	}
	return Pod{KubeletRoot: kubeletRoot, UID: podUID}, nil
}

// Dir is <kubeletRoot>/pods/<podUID>.
func (p Pod) Dir() string { return filepath.Join(p.KubeletRoot, "pods", p.UID) }

// EmptyDir is the host path of the emptyDir volume name.
func (p Pod) EmptyDir(name string) string {
	return filepath.Join(p.Dir(), "volumes", "kubernetes.io~empty-dir", name)
}

// SecretDir is the host path of the secret volume that carries the
// cloud-init secret of the VMI volume named volume.
func (p Pod) SecretDir(volume string) string {
	return filepath.Join(p.Dir(), "volumes", "kubernetes.io~secret", volume+"-secret")
}

// SocketsDir is the sockets emptyDir.
func (p Pod) SocketsDir() string { return p.EmptyDir(SocketsVolume) }

// PrivateDir is the private emptyDir.
func (p Pod) PrivateDir() string { return p.EmptyDir(PrivateVolume) }

// Socket is the host path of a file in the sockets emptyDir, e.g.
// Socket(QMPSocket).
func (p Pod) Socket(name string) string { return filepath.Join(p.SocketsDir(), name) }

// CloudInitISO is the host path of the NoCloud ISO of the VMI volume named
// volume.
func (p Pod) CloudInitISO(volume string) string {
	return filepath.Join(p.PrivateDir(), "cloudinit", volume+".iso")
}
