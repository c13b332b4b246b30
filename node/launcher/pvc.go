package launcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/nodevirt/nodevirt/node/launchspec"
)

// Errors of PVC preparation (wrapped, with the volume named).
var (
	// ErrPVCTooSmall: a filesystem-mode PVC has too little free space for
	// the disk.img it should hold.
	ErrPVCTooSmall = errors.New("volume too small for its disk image")
	// ErrPVCNoImage: a filesystem-mode PVC has no disk.img and the launcher
	// may not create one (read-only volume, or capacity unknown).
	ErrPVCNoImage = errors.New("volume has no disk image")
	// ErrPVCNotBlock: a block-mode PVC's path is not a usable block device.
	ErrPVCNotBlock = errors.New("volume is not a usable block device")
)

// pvcSpaceToleration is how much less free space than a disk.img's size a
// volume may have and still get one, shrunk to the free space (KubeVirt's
// default "less PVC space toleration", 10 %): a fresh filesystem's own
// metadata and reserved blocks can take more than the overhead reserve.
const pvcSpaceToleration = 0.10

// creatingName is the file a disk.img is built in before it is linked to
// its name. QEMU never opens it, so one left by a crash holds no data.
const creatingName = ".disk.img.creating"

// preparePVCFile makes sure a filesystem-mode PVC holds its disk.img. One
// that exists is used as it is: never resized, truncated or replaced, so a
// restarted VM or launcher finds the guest's data. An absent one is created
// sparse, fsynced with its directory, and linked to its name only when
// complete (link fails if the name exists: O_EXCL semantics for the final
// name), so a crash never leaves a short disk.img behind.
func preparePVCFile(d launchspec.DiskPrep) error {
	fi, err := os.Lstat(d.Target)
	switch {
	case err == nil:
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file (%s)", d.Target, fi.Mode().Type())
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("stat %s: %w", d.Target, err)
	case d.SizeBytes == 0:
		return fmt.Errorf("%w: %s is absent, and the volume is read-only or its capacity unknown", ErrPVCNoImage, d.Target)
	}
	dir := filepath.Dir(d.Target)
	size, err := pvcImageSize(dir, d.SizeBytes)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, creatingName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove an earlier attempt's %s: %w", tmp, err)
	}
	if err := createSparse(tmp, size); err != nil {
		return fmt.Errorf("create the disk image in a volume that must be writable by uid %d: %w", os.Getuid(), err)
	}
	err = os.Link(tmp, d.Target)
	if rmErr := os.Remove(tmp); err == nil && rmErr != nil {
		err = rmErr
	}
	if err != nil && !errors.Is(err, fs.ErrExist) { // ErrExist: another launcher won; use its image
		return fmt.Errorf("link %s: %w", d.Target, err)
	}
	return syncDir(dir)
}

// pvcImageSize is want, or the free space of dir aligned down to 1 MiB when
// that is less but within pvcSpaceToleration.
func pvcImageSize(dir string, want int64) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if free >= want {
		return want, nil
	}
	if float64(free) < float64(want)*(1-pvcSpaceToleration) {
		return 0, fmt.Errorf("%w: disk.img needs %d bytes, %s has %d free", ErrPVCTooSmall, want, dir, free)
	}
	return free / (1 << 20) * (1 << 20), nil
}

func createSparse(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o660)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("size %s to %d bytes: %w", path, size, err)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// checkPVCBlock checks that a block-mode PVC's device is a block device the
// launcher (and so QEMU, the same user) can open as the disk needs.
func checkPVCBlock(d launchspec.DiskPrep) error {
	fi, err := os.Stat(d.Target)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPVCNotBlock, err)
	}
	if fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
		return fmt.Errorf("%w: %s is %s", ErrPVCNotBlock, d.Target, fi.Mode().Type())
	}
	flag := os.O_RDWR
	if d.ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(d.Target, flag, 0)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPVCNotBlock, err)
	}
	return f.Close()
}
