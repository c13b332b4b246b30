package migration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// vmSpec shapes a test VM: deploy/examples/vm.yaml's guest (kernelBoot of
// the test guest, 128 MiB, masquerade with port 80 declared) with the
// settings a scenario needs.
type vmSpec struct {
	name     string
	node     string // nodeSelector kubernetes.io/hostname; "" = anywhere
	bridge   bool   // bridge binding on the pod network instead of masquerade
	eviction string // spec.evictionStrategy; "" = unset
	dirty    bool   // user-data starts a process that keeps dirtying guest memory
	memory   string // spec.domain.memory.guest; "" = 128Mi
	disks    bool   // node-local disks the guest writes at boot: a containerDisk (vdb) and an emptyDisk (vdc)
	// claims are PVCs attached as disks (vdb, vdc, ...; instead of disks),
	// on which the guest writes claimMarks at boot.
	claims     []string
	claimMarks []string
}

// Where the guest writes on its disks: a marker per disk at 2 MiB,
// written through to the disk before NODEVIRT-DISKS-WRITTEN on the
// console (vmSpec.disks: the containerDisk and the emptyDisk).
const (
	containerDiskMark = "NODEVIRT-CONTAINERDISK"
	emptyDiskMark     = "NODEVIRT-EMPTYDISK"
	markOffset        = 2 << 20
)

// diskDev is the guest's device of its disk number i after the cloud-init
// disk (/dev/vdb, /dev/vdc, ...).
func diskDev(i int) string { return "/dev/vd" + string(rune('b'+i)) }

// writeMarks is the guest script writing marks[i] at markOffset of disk i.
func writeMarks(marks ...string) string {
	var b strings.Builder
	for i, m := range marks {
		fmt.Fprintf(&b, "printf %s | dd of=%s bs=512 seek=%d conv=fsync 2>/dev/null\n", m, diskDev(i), markOffset/512)
	}
	b.WriteString("echo NODEVIRT-DISKS-WRITTEN")
	return b.String()
}

// readMarks is the guest command reading the marks back from the disks
// themselves (the page cache dropped first: it travels with the guest's
// RAM), one per line.
func readMarks(marks ...string) string {
	parts := []string{"echo 3 >/proc/sys/vm/drop_caches"}
	for i, m := range marks {
		parts = append(parts, fmt.Sprintf("dd if=%s bs=512 skip=%d count=1 2>/dev/null | head -c %d; echo", diskDev(i), markOffset/512, len(m)))
	}
	return strings.Join(parts, "; ")
}

// dirtier rewrites an 8 MiB file in the guest's RAM root ten times a
// second: a steady stream of dirty pages (up to 80 MiB/s) that a
// pre-copy migration must keep up with, gentle enough to converge under TCG.
const dirtier = `( while :; do dd if=/dev/zero of=/run/dirty bs=1M count=8 2>/dev/null; usleep 100000; done ) >/dev/null 2>&1 </dev/null &
echo "NODEVIRT-MIGRATION-DIRTIER pid=$!"`

func (v vmSpec) manifest() []byte {
	var extra []string
	if v.node != "" {
		extra = append(extra, "nodeSelector: {kubernetes.io/hostname: "+v.node+"}")
	}
	if v.eviction != "" {
		extra = append(extra, "evictionStrategy: "+v.eviction)
	}
	binding := "masquerade: {}\n            ports:\n            - {name: http, port: 80}"
	if v.bridge {
		binding = "bridge: {}"
	}
	script := `echo "hello from $(hostname)"`
	if v.dirty {
		script = dirtier
	}
	disks, volumes := "", ""
	if v.disks {
		script += "\n" + writeMarks(containerDiskMark, emptyDiskMark)
		disks = `
          - name: data
            disk: {bus: virtio}
          - name: scratch
            disk: {bus: virtio}`
		volumes = `      - name: data
        containerDisk: {image: nodevirt.local/guest-disk:dev}
      - name: scratch
        emptyDisk: {capacity: 64Mi}
`
	}
	for i, c := range v.claims {
		disks += fmt.Sprintf("\n          - name: claim%d\n            disk: {bus: virtio}", i)
		volumes += fmt.Sprintf("      - name: claim%d\n        persistentVolumeClaim: {claimName: %s}\n", i, c)
	}
	if len(v.claimMarks) > 0 {
		script += "\n" + writeMarks(v.claimMarks...)
	}
	memory := v.memory
	if memory == "" {
		memory = "128Mi"
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: %[1]s
  labels: {app: nodevirt-migration}
spec:
  runStrategy: Always
  template:
    metadata:
      labels: {app: nodevirt-migration, vm: %[1]s}
    spec:
%[2]s      terminationGracePeriodSeconds: 5
      domain:
        cpu: {cores: 1}
        memory: {guest: %[5]s}
        firmware:
          kernelBoot:
            kernelArgs: console=ttyS0 quiet panic=-1
            container:
              image: nodevirt.local/guest-kernel:dev
              kernelPath: /boot/vmlinux
              initrdPath: /boot/initrd.img
        devices:
          autoattachGraphicsDevice: false
          disks:
          - name: cloudinit
            disk: {bus: virtio}%[6]s
          interfaces:
          - name: default
            %[3]s
      networks:
      - name: default
        pod: {}
      volumes:
      - name: cloudinit
        cloudInitNoCloud:
          userData: |
            #!/bin/sh
%[4]s%[7]s
`, v.name, indent(extra, "      "), binding, indent(strings.Split(script, "\n"), "            "), memory, disks, volumes)
	return []byte(b.String())
}

func indent(lines []string, prefix string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

// startVM creates the VM and waits until it runs (startVMs).
func (s *suite) startVM(t *testing.T, v vmSpec) *vmiView {
	t.Helper()
	return s.startVMs(t, v)[0]
}

// startVMs creates the VMs, then waits until each VMI runs (on its node
// when set), its guest has an address and, with dirty, the dirtier runs.
// The VMs are deleted when the test ends.
func (s *suite) startVMs(t *testing.T, vms ...vmSpec) []*vmiView {
	t.Helper()
	began := time.Now()
	for _, v := range vms {
		s.kubectl(t, v.manifest(), "apply", "-n", namespace, "-f", "-")
		t.Cleanup(func() { s.deleteVM(t, v.name) })
	}
	var out []*vmiView
	for _, v := range vms {
		cond := running
		if v.node != "" {
			cond = runningOn(v.node)
		}
		vmi := s.waitVMI(t, v.name, 90*time.Second, "Running", func(x *vmiView) bool { return cond(x) && x.podIP() != "" })
		running := time.Since(began)
		pod := s.activePod(t, vmi.Metadata.UID, vmi.Status.NodeName)
		s.waitSerial(t, pod, "NODEVIRT-GUEST-DHCP ip=", 90*time.Second)
		if v.dirty {
			s.waitSerial(t, pod, "NODEVIRT-MIGRATION-DIRTIER", 60*time.Second)
		}
		t.Logf("VM %s on %s (pod %s, IP %s): VMI Running %v, guest up %v after create", v.name, vmi.Status.NodeName,
			pod.Name, pod.Status.PodIP, running.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond))
		out = append(out, vmi)
	}
	return out
}

// deleteVM deletes VM name and waits until its VMI is gone.
func (s *suite) deleteVM(t *testing.T, name string) {
	t.Helper()
	if _, err := s.kubectlErr(nil, "delete", "-n", namespace, "vm", name, "--ignore-not-found", "--wait=true", "--timeout=120s"); err != nil {
		t.Errorf("delete VM %s: %v", name, err)
	}
	if _, err := s.kubectlErr(nil, "wait", "-n", namespace, "vmi/"+name, "--for=delete", "--timeout=120s"); err != nil &&
		!strings.Contains(err.Error(), "NotFound") {
		t.Errorf("VMI %s not gone: %v", name, err)
	}
}

// nodeOf returns the cluster node named name.
func (s *suite) nodeDir(t *testing.T, name string) (dir, kubeletRoot string) {
	t.Helper()
	for _, n := range s.cluster.Nodes {
		if n.Name == name {
			return n.Dir, n.KubeletRoot
		}
	}
	t.Fatalf("node %q is not a cluster node", name)
	return "", ""
}

// socketsDir is the launcher pod's sockets emptyDir on the host.
func (s *suite) socketsDir(t *testing.T, pod corev1.Pod) string {
	t.Helper()
	_, root := s.nodeDir(t, pod.Spec.NodeName)
	return filepath.Join(root, "pods", string(pod.UID), "volumes", "kubernetes.io~empty-dir", "sockets")
}

// waitSerial waits for a line of the pod's serial log that starts with
// prefix and returns it.
func (s *suite) waitSerial(t *testing.T, pod corev1.Pod, prefix string, timeout time.Duration) string {
	t.Helper()
	path := filepath.Join(s.socketsDir(t, pod), "serial.log")
	var line string
	testenv.Eventually(t, timeout, fmt.Sprintf("a line starting with %q in %s", prefix, path), func() error {
		b, err := os.ReadFile(path)
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimRight(l, "\r"); strings.HasPrefix(l, prefix) {
				line = l
				return nil
			}
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("not yet; log ends with %q", lastBytes(b, 400))
	})
	return line
}

func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// nodeAPI sends one request to the node API (unix socket) of node.
func (s *suite) nodeAPI(ctx context.Context, t *testing.T, node, method, path string, body any) (int, []byte, error) {
	t.Helper()
	dir, _ := s.nodeDir(t, node)
	sock := filepath.Join(dir, "nodevirt", "agent.sock")
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://node"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("node API %s %s on %s: %w", method, path, node, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// guestExec runs path with args in the guest of VMI name on node through
// the guest agent's guest-exec (the node API's passthrough) and returns
// its standard output.
func (s *suite) guestExec(t *testing.T, node, name string, path string, args ...string) string {
	t.Helper()
	api := "/nodectl/v1/agent?vmi=" + namespace + "/" + name
	var started struct {
		Return struct {
			PID int `json:"pid"`
		} `json:"return"`
	}
	// 409: the node's agent does not reach the guest agent (yet): right
	// after a migration it connects once the guest arrived.
	var code int
	var body []byte
	var err error
	deadline := time.Now().Add(guestAgentWait)
	for {
		code, body, err = s.nodeAPI(t.Context(), t, node, http.MethodPost, api, map[string]any{
			"execute":   "guest-exec",
			"arguments": map[string]any{"path": path, "arg": args, "capture-output": true},
		})
		if err != nil || code != http.StatusConflict || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &started) != nil {
		t.Fatalf("guest-exec %s in %s on %s: %v HTTP %d %s", path, name, node, err, code, body)
	}
	var out string
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("guest-exec %s in %s to finish", path, name), func() error {
		var st struct {
			Return struct {
				Exited  bool   `json:"exited"`
				OutData string `json:"out-data"`
			} `json:"return"`
		}
		code, body, err := s.nodeAPI(t.Context(), t, node, http.MethodPost, api, map[string]any{
			"execute": "guest-exec-status", "arguments": map[string]any{"pid": started.Return.PID},
		})
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &st) != nil {
			return fmt.Errorf("guest-exec-status: %v HTTP %d %s", err, code, body)
		}
		if !st.Return.Exited {
			return fmt.Errorf("pid %d still running", started.Return.PID)
		}
		b, err := base64.StdEncoding.DecodeString(st.Return.OutData)
		out = string(b)
		return err
	})
	return out
}

// guestAgentWait bounds how long guestExec waits for the node's agent to
// reach the guest agent: a probe period (5 s) and a sync, with room.
const guestAgentWait = 15 * time.Second

// guestUptime is the guest's /proc/uptime in seconds.
func (s *suite) guestUptime(t *testing.T, node, name string) float64 {
	t.Helper()
	out := s.guestExec(t, node, name, "/bin/cat", "/proc/uptime")
	f := strings.Fields(out)
	if len(f) == 0 {
		t.Fatalf("guest %s /proc/uptime: %q", name, out)
	}
	up, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("guest %s /proc/uptime %q: %v", name, out, err)
	}
	return up
}
