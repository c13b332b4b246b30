package launcher

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/qcow2"
)

func TestHolderDisk(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "disk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := holderDisk(root, ""); err == nil {
		t.Errorf("empty /disk: no error")
	}
	if err := os.WriteFile(filepath.Join(root, "disk", "a.img"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := holderDisk(root, ""); err != nil || got != filepath.Join(root, "disk", "a.img") {
		t.Errorf("holderDisk default = %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(root, "disk", "b.img"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := holderDisk(root, ""); err == nil {
		t.Errorf("two files in /disk: no error")
	}
	if got, err := holderDisk(root, "/disk/b.img"); err != nil || got != filepath.Join(root, "disk", "b.img") {
		t.Errorf("holderDisk explicit = %q, %v", got, err)
	}
	for _, bad := range []string{"/../etc/passwd", "../../x"} {
		if got, err := holderDisk(root, bad); err == nil {
			t.Errorf("holderDisk(%q) = %q, want an error", bad, got)
		}
	}
}

func TestPrepareEmptyDisk_SparseAndKept(t *testing.T) {
	priv := t.TempDir()
	s, err := NewServer(Config{SocketsDir: t.TempDir(), PrivateDir: priv})
	if err != nil {
		t.Fatal(err)
	}
	d := launchspec.DiskPrep{Volume: "e", Kind: launchspec.EmptyDisk, Target: filepath.Join(priv, "empty", "e.img"), Format: "raw", SizeBytes: 1 << 30}
	if err := s.prepareDisks(context.Background(), []launchspec.DiskPrep{d}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d.Target)
	if err != nil || fi.Size() != 1<<30 {
		t.Fatalf("stat = %v, %v; want 1 GiB", fi, err)
	}
	if err := os.WriteFile(d.Target, []byte("guest data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.prepareDisks(context.Background(), []launchspec.DiskPrep{d}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(d.Target); string(b) != "guest data" {
		t.Errorf("an existing emptyDisk image was replaced")
	}
}

func TestPrepareEmptyDisk_QCOW2(t *testing.T) {
	priv := t.TempDir()
	d := launchspec.DiskPrep{Volume: "e", Kind: launchspec.EmptyDisk, Target: filepath.Join(priv, "empty", "e.qcow2"), Format: "qcow2", SizeBytes: 1 << 30}
	if err := prepareEmptyDisk(d); err != nil {
		t.Fatal(err)
	}
	if format, size, err := qcow2.Probe(d.Target); err != nil || format != qcow2.FormatQCOW2 || size != 1<<30 {
		t.Fatalf("Probe = %s, %d, %v; want a 1 GiB qcow2 image", format, size, err)
	}
	fi, err := os.Stat(d.Target)
	if err != nil {
		t.Fatal(err)
	}
	if err := prepareEmptyDisk(d); err != nil {
		t.Fatal(err)
	}
	if again, err := os.Stat(d.Target); err != nil || !os.SameFile(fi, again) {
		t.Errorf("an existing qcow2 emptyDisk image was replaced")
	}
}

func TestWaitHolderPID(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "disks", "v.pid")
	go func() {
		time.Sleep(150 * time.Millisecond)
		_ = os.MkdirAll(filepath.Dir(pidFile), 0o755)
		_ = os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	}()
	pid, err := waitHolderPID(context.Background(), pidFile, 10*time.Second)
	if err != nil || pid != os.Getpid() {
		t.Errorf("waitHolderPID = %d, %v; want %d", pid, err, os.Getpid())
	}
	if _, err := waitHolderPID(context.Background(), pidFile+".missing", 200*time.Millisecond); err == nil {
		t.Errorf("waitHolderPID of a missing file: no error")
	}
}

func TestPrepareFirmwareVars_CopiedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "OVMF_VARS.template")
	if err := os.WriteFile(tmpl, []byte("template"), 0o444); err != nil {
		t.Fatal(err)
	}
	d := launchspec.DiskPrep{Volume: "efi-vars", Kind: launchspec.FirmwareVars, Format: "raw",
		Target: filepath.Join(dir, "private", "efi", "OVMF_VARS.fd"), SourcePath: tmpl}
	if err := prepareFirmwareVars(d); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(d.Target); err != nil || string(b) != "template" {
		t.Fatalf("copy = %q, %v", b, err)
	}
	// The guest wrote its NVRAM: a second prepare keeps it, and the
	// template was never written.
	if err := os.WriteFile(d.Target, []byte("guest vars"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareFirmwareVars(d); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(d.Target); string(b) != "guest vars" {
		t.Errorf("NVRAM replaced on a second prepare: %q", b)
	}
	if b, _ := os.ReadFile(tmpl); string(b) != "template" {
		t.Errorf("template changed: %q", b)
	}
}
