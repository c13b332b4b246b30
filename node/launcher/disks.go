package launcher

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/qcow2"
)

// prepareDisks creates the images the spec lists, in order.
func (s *Server) prepareDisks(ctx context.Context, disks []launchspec.DiskPrep) error {
	for _, d := range disks {
		var err error
		switch d.Kind {
		case launchspec.ContainerDisk:
			err = s.prepareContainerDisk(ctx, d)
		case launchspec.EmptyDisk:
			err = prepareEmptyDisk(d)
		case launchspec.PVCFile:
			err = preparePVCFile(d)
		case launchspec.PVCBlock:
			err = checkPVCBlock(d)
		case launchspec.FirmwareVars:
			err = prepareFirmwareVars(d)
		default:
			err = fmt.Errorf("unknown kind %q", d.Kind)
		}
		if err != nil {
			return fmt.Errorf("prepare %s volume %q: %w", d.Kind, d.Volume, err)
		}
	}
	return nil
}

// prepareContainerDisk creates a qcow2 overlay backed by the disk in the
// image: an image volume mounted at ImageRoot, or the holder container's
// root, reached through /proc/<holder pid>/root.
func (s *Server) prepareContainerDisk(ctx context.Context, d launchspec.DiskPrep) error {
	root := d.ImageRoot
	if root == "" {
		pid, err := waitHolderPID(ctx, d.HolderPIDFile, s.cfg.HolderWait)
		if err != nil {
			return err
		}
		root = fmt.Sprintf("/proc/%d/root", pid)
	}
	src, err := holderDisk(root, d.SourcePath)
	if err != nil {
		return err
	}
	format, size, err := qcow2.Probe(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(d.Target), 0o755); err != nil {
		return err
	}
	// An overlay left by an earlier attempt holds no guest data yet (QEMU
	// never ran from it in this pod): Create replaces it.
	return qcow2.Create(d.Target, size, &qcow2.Backing{Path: src, Format: format})
}

// prepareEmptyDisk creates a sparse image unless it exists.
func prepareEmptyDisk(d launchspec.DiskPrep) error {
	if _, err := os.Stat(d.Target); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(d.Target), 0o755); err != nil {
		return err
	}
	if d.Format == qcow2.FormatQCOW2 {
		return qcow2.Create(d.Target, d.SizeBytes, nil)
	}
	f, err := os.OpenFile(d.Target, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(d.SizeBytes); err != nil {
		f.Close()
		os.Remove(d.Target)
		return err
	}
	return f.Close()
}

// prepareFirmwareVars copies the variable store template unless the VM
// already has its copy. The copy is written under a temporary name and
// renamed, so a crash never leaves a truncated NVRAM behind.
func prepareFirmwareVars(d launchspec.DiskPrep) error {
	if _, err := os.Stat(d.Target); err == nil {
		return nil
	}
	src, err := os.Open(d.SourcePath)
	if err != nil {
		return fmt.Errorf("firmware variable store template: %w", err)
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(d.Target), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(d.Target), ".vars-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("copy %s: %w", d.SourcePath, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), d.Target)
}

// waitHolderPID polls pidFile until it names a live process.
func waitHolderPID(ctx context.Context, pidFile string, wait time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if perr == nil && pid > 0 {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d/root", pid)); err == nil {
					return pid, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for disk holder pid in %s: %w", pidFile, ctx.Err())
		case <-tick.C:
		}
	}
}

// holderDisk resolves the disk file inside an image's root (a holder's or
// an image volume's). An empty path means the only regular file under
// /disk/.
func holderDisk(root, path string) (string, error) {
	if path == "" {
		dir := filepath.Join(root, "disk")
		entries, err := os.ReadDir(dir)
		if err != nil {
			return "", fmt.Errorf("find the disk: %w", err)
		}
		var files []string
		for _, e := range entries {
			if e.Type().IsRegular() {
				files = append(files, e.Name())
			}
		}
		if len(files) != 1 {
			return "", fmt.Errorf("find the disk: want exactly one file in /disk/, found %q", files)
		}
		return filepath.Join(dir, files[0]), nil
	}
	full := filepath.Join(root, path)
	if !strings.HasPrefix(full, root+"/") {
		return "", fmt.Errorf("disk path %q leaves the container's root", path)
	}
	return full, nil
}
