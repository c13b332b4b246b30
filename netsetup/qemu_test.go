package netsetup

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// qemuUID is the unprivileged user the launcher runs QEMU as; the tests run
// QEMU as it too, proving the tap is usable without privileges.
const qemuUID = 107

func requireGuest(t *testing.T) (kernel, initrd string) {
	t.Helper()
	requireRoot(t)
	dir := testenv.GuestDir(t, "vmlinux", "initrd.img")
	return filepath.Join(dir, "vmlinux"), filepath.Join(dir, "initrd.img")
}

// console collects a guest's serial output.
type console struct {
	mu    sync.Mutex
	lines []string
}

func (c *console) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		c.mu.Lock()
		c.lines = append(c.lines, strings.TrimRight(sc.Text(), "\r"))
		c.mu.Unlock()
	}
}

// waitFor polls until a line starting with prefix appears.
func (c *console) waitFor(t *testing.T, prefix string, timeout time.Duration) string {
	t.Helper()
	var line string
	testenv.Eventually(t, timeout, fmt.Sprintf("%q on the serial console", prefix), func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, l := range c.lines {
			if strings.HasPrefix(l, prefix) {
				line = l
				return nil
			}
		}
		return fmt.Errorf("console:\n%s", strings.Join(c.lines, "\n"))
	})
	return line
}

// startGuest boots the test guest under TCG inside the pod netns, as uid
// 107, on the plan's tap. It is killed in t.Cleanup.
func startGuest(t *testing.T, podNS string, plan Plan) (c *console, stop func()) {
	t.Helper()
	kernel, initrd := requireGuest(t)
	cmd := exec.Command("qemu-system-x86_64",
		"-accel", "tcg", "-cpu", "max", "-machine", "q35", "-m", "256", "-smp", "1",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", kernel, "-initrd", initrd, "-append", "console=ttyS0 quiet panic=-1",
		"-serial", "stdio",
		"-netdev", "tap,id=net0,ifname="+plan.Tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=net0,mac="+plan.GuestMAC.String(),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: qemuUID, Gid: qemuUID}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	c = &console{}
	netns, err := ns.GetNS(podNS)
	if err != nil {
		t.Fatal(err)
	}
	defer netns.Close()
	// The child inherits the netns of the (locked) thread that forks it.
	if err := netns.Do(func(ns.NetNS) error { return cmd.Start() }); err != nil {
		t.Fatalf("start QEMU: %v", err)
	}
	done := make(chan struct{})
	go func() { c.read(out); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-done
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("QEMU stderr: %s", stderr.String())
			}
		})
	}
	t.Cleanup(stop)
	return c, stop
}

func TestQEMU(t *testing.T) {
	requireGuest(t)
	tests := []struct {
		name    string
		binding Binding
		wantIP  string // DHCP marker
		wantGW  string
	}{
		{"masquerade", Masquerade, "10.0.2.2/24", "10.0.2.1"},
		{"bridge", Bridge, podIP + "/24", nodeIP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			tp := newTopo(t)
			before := snapshot(t, tp.pod)
			plan := mustPlan(t, Input{VMIUID: "uid-q", InterfaceName: "default", Binding: tt.binding,
				Ports: []Port{{Name: "http", Port: 80}}, UID: qemuUID, GID: qemuUID, Hostname: "vm-" + tt.name})
			start := time.Now()
			res, err := Ensure(ctx, tp.pod, plan)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("Ensure took %v", time.Since(start))
			serveDHCP(t, tp.pod, res)

			boot := time.Now()
			con, stop := startGuest(t, tp.pod, plan)
			con.waitFor(t, "NODEVIRT-GUEST-READY", 120*time.Second)
			t.Logf("guest ready after %v", time.Since(boot))
			line := con.waitFor(t, "NODEVIRT-GUEST-DHCP", 60*time.Second)
			t.Logf("guest DHCP after %v: %s", time.Since(boot), line)
			if want := fmt.Sprintf("NODEVIRT-GUEST-DHCP ip=%s gw=%s", tt.wantIP, tt.wantGW); line != want {
				t.Fatalf("DHCP marker %q, want %q", line, want)
			}
			if gw := con.waitFor(t, "NODEVIRT-GUEST-GW-", 60*time.Second); gw != "NODEVIRT-GUEST-GW-OK" {
				t.Errorf("gateway check: %q", gw)
			}

			// The guest's httpd may start a moment after DHCP: poll.
			want := "nodevirt-guest vm-" + tt.name + "\n"
			var body string
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				if body, err = httpGetFrom(t, tp.node, podIP+":80"); err == nil && body == want {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if body != want {
				t.Errorf("node -> pod IP:80 = %q, %v; want %q", body, err, want)
			}
			// Masquerade forwards only the declared ports[]. Bridge binding
			// ignores ports[] as KubeVirt does: the guest owns the pod IP.
			body8080, err := httpGetFrom(t, tp.node, podIP+":8080")
			if tt.binding == Masquerade && err == nil {
				t.Errorf("node -> pod IP:8080 (undeclared) answered %q, want unreachable", body8080)
			}
			if tt.binding == Bridge && body8080 != want {
				t.Errorf("node -> pod IP:8080 (bridge) = %q, %v; want %q", body8080, err, want)
			}
			t.Logf("boot to HTTP reachable: %v", time.Since(boot))

			// A restarted agent calls Ensure again while QEMU holds the tap.
			again, err := Ensure(ctx, tp.pod, plan)
			if err != nil {
				t.Fatal(err)
			}
			if len(again.Changed) != 0 {
				t.Errorf("Ensure with the guest running changed %v, want nothing", again.Changed)
			}

			stop()
			if err := Release(ctx, tp.pod, plan); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, snapshot(t, tp.pod)); diff != "" {
				t.Errorf("pod netns after Release differs from before Ensure (-before +after):\n%s", diff)
			}
		})
	}
}
