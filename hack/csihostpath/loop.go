package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// loopMajor is the loop devices' block major number.
const loopMajor = 7

// attachLoop binds file to a free loop device (read-only when ro) and
// returns the device's path. The device stays bound until detachLoop: no
// autoclear, which would unbind it as soon as this process closes it.
func attachLoop(file string, ro bool) (string, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer ctl.Close()
	flag := os.O_RDWR
	if ro {
		flag = os.O_RDONLY
	}
	backing, err := os.OpenFile(file, flag, 0)
	if err != nil {
		return "", err
	}
	defer backing.Close()
	for range 10 { // another process may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		if err := ensureNode(dev, n); err != nil {
			return "", err
		}
		lf, err := os.OpenFile(dev, flag, 0)
		if err != nil {
			return "", err
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
		if ro {
			cfg.Info.Flags = unix.LO_FLAGS_READ_ONLY
		}
		copy(cfg.Info.File_name[:], file)
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		lf.Close()
		if errors.Is(err, syscall.EBUSY) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("LOOP_CONFIGURE %s: %w", dev, err)
		}
		return dev, nil
	}
	return "", errors.New("no free loop device after 10 tries")
}

// ensureNode makes the device node of loop device n when this mount
// namespace's /dev lacks it (a container's /dev is not the host's).
func ensureNode(dev string, n int) error {
	if _, err := os.Stat(dev); err == nil {
		return nil
	}
	err := unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(loopMajor, uint32(n))))
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("mknod %s: %w", dev, err)
	}
	return nil
}

// detachLoop unbinds dev if it still backs file (after a host restart the
// number may back something else, or nothing). A device still open (a
// QEMU using it) is unbound by the kernel at its last close.
func detachLoop(dev, file string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	if errors.Is(err, syscall.ENXIO) {
		return nil // bound to nothing
	}
	if err != nil {
		return fmt.Errorf("LOOP_GET_STATUS64 %s: %w", dev, err)
	}
	name := strings.TrimRight(string(info.File_name[:]), "\x00")
	if !strings.HasPrefix(file, name) { // File_name holds at most 63 bytes
		return nil
	}
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, syscall.ENXIO) {
		return fmt.Errorf("LOOP_CLR_FD %s: %w", dev, err)
	}
	return nil
}
