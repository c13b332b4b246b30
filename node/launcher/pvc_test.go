package launcher

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nodevirt/nodevirt/node/launchspec"
)

func pvcPrep(dir string, size int64) launchspec.DiskPrep {
	return launchspec.DiskPrep{Volume: "data", Kind: launchspec.PVCFile, Target: filepath.Join(dir, launchspec.PVCImageName),
		Format: "raw", SizeBytes: size}
}

func TestPreparePVCFile_CreatesSparseOnce(t *testing.T) {
	dir := t.TempDir()
	// A crash of an earlier attempt left its unfinished image.
	if err := os.WriteFile(filepath.Join(dir, creatingName), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := pvcPrep(dir, 64<<20)
	if err := preparePVCFile(d); err != nil {
		t.Fatalf("preparePVCFile: %v", err)
	}
	fi, err := os.Stat(d.Target)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 64<<20 {
		t.Errorf("size = %d, want %d", fi.Size(), 64<<20)
	}
	if blocks := fi.Sys().(*syscall.Stat_t).Blocks; blocks*512 >= 1<<20 {
		t.Errorf("disk.img allocates %d bytes, want a sparse file", blocks*512)
	}
	if _, err := os.Stat(filepath.Join(dir, creatingName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind: %v", creatingName, err)
	}

	// Guest data; then a restart asks for another size: the image is kept
	// as it is, never resized, truncated or replaced.
	f, err := os.OpenFile(d.Target, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("guest data"), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, size := range []int64{64 << 20, 128 << 20, 1 << 20, 0} {
		if err := preparePVCFile(pvcPrep(dir, size)); err != nil {
			t.Fatalf("preparePVCFile again (size %d): %v", size, err)
		}
	}
	b, err := os.ReadFile(d.Target)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) != 64<<20 || !bytes.Equal(b[1<<20:1<<20+10], []byte("guest data")) {
		t.Errorf("disk.img changed: size %d, data %q", len(b), b[1<<20:1<<20+10])
	}
}

func TestPreparePVCFile_Errors(t *testing.T) {
	dir := t.TempDir()
	if err := preparePVCFile(pvcPrep(dir, 0)); !errors.Is(err, ErrPVCNoImage) {
		t.Errorf("absent image, no size: %v, want ErrPVCNoImage", err)
	}
	if err := preparePVCFile(pvcPrep(dir, 1<<60)); !errors.Is(err, ErrPVCTooSmall) {
		t.Errorf("1 EiB image: %v, want ErrPVCTooSmall", err)
	}
	if err := os.Mkdir(filepath.Join(dir, launchspec.PVCImageName), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := preparePVCFile(pvcPrep(dir, 1<<20)); err == nil {
		t.Errorf("disk.img is a directory: no error")
	}
	if err := preparePVCFile(pvcPrep(filepath.Join(dir, "missing"), 1<<20)); err == nil {
		t.Errorf("volume not mounted: no error")
	}
}

func TestPVCImageSize_Toleration(t *testing.T) {
	dir := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	// 5 % more than free is tolerated (shrunk to the free space); 20 % is not.
	if got, err := pvcImageSize(dir, free+free/20); err != nil || got > free || got < free-(2<<20) {
		t.Errorf("pvcImageSize(free+5%%) = %d, %v; want about %d", got, err, free)
	}
	if _, err := pvcImageSize(dir, free+free/5); !errors.Is(err, ErrPVCTooSmall) {
		t.Errorf("pvcImageSize(free+20%%) = %v, want ErrPVCTooSmall", err)
	}
}

func TestCheckPVCBlock(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(dir, "missing"), "/dev/null"} {
		err := checkPVCBlock(launchspec.DiskPrep{Volume: "b", Kind: launchspec.PVCBlock, Target: p})
		if !errors.Is(err, ErrPVCNotBlock) {
			t.Errorf("checkPVCBlock(%s) = %v, want ErrPVCNotBlock", p, err)
		}
	}
}

func TestServer_PVCTargets(t *testing.T) {
	s := &Server{cfg: Config{SocketsDir: "/s", PrivateDir: "/p", PVCDir: "/v", BlockDir: "/b"}}
	ok := []launchspec.DiskPrep{
		{Volume: "data", Kind: launchspec.PVCFile, Target: "/v/data/disk.img"},
		{Volume: "blk", Kind: launchspec.PVCBlock, Target: "/b/blk"},
	}
	if err := s.checkPaths(launchspec.Spec{Disks: ok}); err != nil {
		t.Errorf("checkPaths(PVC targets) = %v", err)
	}
	for _, bad := range []launchspec.DiskPrep{
		{Volume: "data", Kind: launchspec.PVCFile, Target: "/v/other/disk.img"},
		{Volume: "data", Kind: launchspec.PVCFile, Target: "/p/data/disk.img"},
		{Volume: "blk", Kind: launchspec.PVCBlock, Target: "/dev/sda"},
	} {
		if err := s.checkPaths(launchspec.Spec{Disks: []launchspec.DiskPrep{bad}}); err == nil {
			t.Errorf("checkPaths(%+v): no error", bad)
		}
	}
}
