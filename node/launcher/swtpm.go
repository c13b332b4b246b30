package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/nodevirt/nodevirt/node/launchspec"
)

// swtpmProc is the TPM emulator of a VM with devices.tpm: started before
// QEMU, which connects to its control socket, and gone with QEMU (swtpm's
// --terminate ends it when that connection closes; stop makes sure).
type swtpmProc struct {
	cmd    *exec.Cmd
	waited chan struct{}
}

// startTPM starts swtpm for t (nil: no TPM, nil result) and waits until
// its control socket exists.
func (s *Server) startTPM(ctx context.Context, t *launchspec.TPM) (*swtpmProc, error) {
	if t == nil {
		return nil, nil
	}
	if err := checkTPMKernel(t.BIOSKernel); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(t.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("vTPM state directory: %w", err)
	}
	if err := os.Remove(t.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("vTPM control socket: %w", err)
	}
	cmd := exec.Command(s.cfg.SWTPM, "socket", "--tpm2",
		"--tpmstate", "dir="+t.StateDir+",mode=0600",
		"--ctrl", "type=unixio,path="+t.Socket+",mode=0600",
		"--terminate")
	cmd.Stdout, cmd.Stderr = s.cfg.QEMUOutput, s.cfg.QEMUOutput
	// Like QEMU, swtpm must not outlive the launcher.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.cfg.SWTPM, err)
	}
	p := &swtpmProc{cmd: cmd, waited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.waited)
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if _, err := os.Stat(t.Socket); err == nil {
			s.log.Info("vTPM running", "pid", cmd.Process.Pid)
			return p, nil
		}
		select {
		case <-p.waited:
			return nil, fmt.Errorf("swtpm exited before its control socket appeared: %s", cmd.ProcessState)
		case <-ctx.Done():
			p.kill()
			return nil, ctx.Err()
		case <-deadline:
			p.kill()
			return nil, fmt.Errorf("swtpm: no control socket %s after 10s", t.Socket)
		case <-tick.C:
		}
	}
}

// stop ends swtpm once QEMU is gone: it normally exits by itself when QEMU
// closes the control connection; after two seconds it is killed.
func (p *swtpmProc) stop() {
	if p == nil {
		return
	}
	select {
	case <-p.waited:
		return
	case <-time.After(2 * time.Second):
	}
	p.kill()
}

// kill ends swtpm at once (no QEMU uses it) and reaps it.
func (p *swtpmProc) kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill() // our own child, by pid
	<-p.waited
}

// checkTPMKernel refuses a PVH ELF kernel (see launchspec.TPM.BIOSKernel).
func checkTPMKernel(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("kernel boot with a vTPM: %w", err)
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err == nil && string(magic) == "\x7fELF" {
		return fmt.Errorf("spec.domain.devices.tpm with spec.domain.firmware.kernelBoot under BIOS: the kernel %s is an ELF (PVH) image, "+
			"whose initrd QEMU 7.2 loads over the firmware's TPM log (the guest would run without ACPI); use a bzImage kernel or firmware.bootloader.efi", path)
	}
	return nil
}
