package convert

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/qmp"
)

const qemuBinary = "/usr/bin/qemu-system-x86_64"

// TestBuild_QEMUAccepts starts the real QEMU (paused, under TCG) with the
// argv of every golden VMI, so a device, bus or property QEMU 7.2 would
// refuse fails here rather than in a pod. Taps become user-mode netdevs
// (no root, nothing created on the host); images are empty files.
func TestBuild_QEMUAccepts(t *testing.T) {
	_, err := os.Stat(qemuBinary)
	testenv.Require(t, err == nil, qemuBinary, "guest-deps")
	for _, name := range []string{"kernelboot", "containerdisk", "buses", "features", "bios-clock"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			paths := launchspec.Paths{Sockets: filepath.Join(dir, "s"), Private: filepath.Join(dir, "p"),
				PVCs: filepath.Join(dir, "v"), Block: filepath.Join(dir, "b")}
			spec, err := Build(Input{VMI: loadVMI(t, name), Node: tcgNode, AllowEmulation: true, Paths: paths,
				Interfaces: []NIC{
					{Name: "default", Tap: "nvtap0", MAC: "02:00:00:00:00:01"},
					{Name: "second", Tap: "nvtap1", MAC: "02:00:00:00:00:02"},
				}})
			if err != nil {
				t.Fatal(err)
			}
			prepareFirmware(t, spec)
			startTPM(t, spec.TPM)
			args := runnable(t, spec.Args)
			if spec.RTC != nil {
				base, err := spec.RTC.Base(time.Now())
				if err != nil {
					t.Fatal(err)
				}
				args = append(args, "-rtc", base)
			}
			runQEMU(t, paths, append(args, "-S"))
		})
	}
}

// runnable rewrites args for an unprivileged run: tap netdevs become user
// netdevs, every image file is created (qcow2 ones with qemu-img), and
// kernel boot options are dropped (QEMU would load the kernel; the
// launcher tests boot a real one).
func runnable(t *testing.T, args []string) []string {
	t.Helper()
	var out []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-kernel", "-initrd", "-append":
			i++
			continue
		}
		out = append(out, args[i])
	}
	for i := 1; i < len(out); i++ {
		var obj map[string]any
		switch out[i-1] {
		case "-netdev":
			if err := json.Unmarshal([]byte(out[i]), &obj); err != nil {
				t.Fatal(err)
			}
			out[i] = jsonArg(map[string]any{"type": "user", "id": obj["id"]})
		case "-blockdev":
			if err := json.Unmarshal([]byte(out[i]), &obj); err != nil {
				t.Fatal(err)
			}
			if fn, ok := obj["filename"].(string); ok {
				if _, err := os.Stat(fn); err == nil {
					continue // firmware: the OVMF code and the VM's VARS copy
				}
				if obj["driver"] == "host_device" {
					t.Fatalf("golden input uses a block device: %s", out[i])
				}
				writeFile(t, fn, 64<<20)
				if strings.HasSuffix(fn, ".qcow2") {
					if b, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", fn, "64M").CombinedOutput(); err != nil {
						t.Fatalf("qemu-img: %v: %s", err, b)
					}
				}
			}
		}
	}
	return out
}

// prepareFirmware does what the launcher does for FirmwareVars: copy the
// VARS template into the VM's private directory.
func prepareFirmware(t *testing.T, spec launchspec.Spec) {
	t.Helper()
	for _, d := range spec.Disks {
		if d.Kind != launchspec.FirmwareVars {
			continue
		}
		b, err := os.ReadFile(d.SourcePath)
		testenv.Require(t, err == nil, d.SourcePath, "guest-deps")
		if err := os.MkdirAll(filepath.Dir(d.Target), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(d.Target, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// startTPM runs swtpm for tpm as the launcher does (nil: nothing) and
// kills it at the end of the test.
func startTPM(t *testing.T, tpm *launchspec.TPM) {
	t.Helper()
	if tpm == nil {
		return
	}
	bin, err := exec.LookPath("swtpm")
	testenv.Require(t, err == nil, "swtpm", "guest-deps")
	if err := os.MkdirAll(tpm.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "socket", "--tpm2", "--tpmstate", "dir="+tpm.StateDir,
		"--ctrl", "type=unixio,path="+tpm.Socket, "--terminate")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // our own child, by pid
		_ = cmd.Wait()
	})
	testenv.Eventually(t, 10*time.Second, "swtpm control socket", func() bool {
		_, err := os.Stat(tpm.Socket)
		return err == nil
	})
}

func writeFile(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// runQEMU starts QEMU, waits for its QMP socket, checks it is paused and
// quits it.
func runQEMU(t *testing.T, paths launchspec.Paths, args []string) {
	t.Helper()
	if err := os.MkdirAll(paths.Sockets, 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd := exec.Command(qemuBinary, args...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mon *qmp.Conn
	for mon == nil {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("QEMU refused the argv: %v\n%s\nargv: %q", err, stderr.String(), args)
		case <-ctx.Done():
			t.Fatalf("no QMP socket: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		mon, _ = qmp.Dial(ctx, paths.Socket(launchspec.QMPSocket))
	}
	defer mon.Close()
	st, err := mon.QueryStatus(ctx)
	if err != nil || st.Status != "prelaunch" {
		t.Errorf("query-status = %+v, %v; want prelaunch", st, err)
	}
	if err := mon.Quit(ctx); err != nil {
		t.Errorf("quit: %v", err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("QEMU exit: %v\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Errorf("QEMU did not exit after quit")
	}
	if s := stderr.String(); s != "" {
		t.Logf("QEMU said: %s", s)
	}
}
