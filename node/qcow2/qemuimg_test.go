package qcow2

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodevirt/nodevirt/hack/testenv"
)

// requireQEMUTools gates the tests that hold images to QEMU's own tools.
func requireQEMUTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"qemu-img", "qemu-io"} {
		_, err := exec.LookPath(tool)
		testenv.Require(t, err == nil, tool, "guest-deps")
	}
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// imageInfo is what qemu-img info says about an image, less its name.
type imageInfo struct {
	VirtualSize   int64  `json:"virtual-size"`
	ClusterSize   int64  `json:"cluster-size"`
	Format        string `json:"format"`
	Backing       string `json:"backing-filename"`
	BackingFormat string `json:"backing-filename-format"`
	Specific      struct {
		Data struct {
			Compat       string `json:"compat"`
			RefcountBits int    `json:"refcount-bits"`
			Corrupt      bool   `json:"corrupt"`
			LazyRefcount bool   `json:"lazy-refcounts"`
			ExtendedL2   bool   `json:"extended-l2"`
		} `json:"data"`
	} `json:"format-specific"`
	Length int64 `json:"-"`
}

func info(t *testing.T, image string) imageInfo {
	t.Helper()
	var i imageInfo
	if err := json.Unmarshal(run(t, "qemu-img", "info", "--output=json", "-U", image), &i); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(image)
	if err != nil {
		t.Fatal(err)
	}
	i.Length = st.Size()
	return i
}

// check runs qemu-img check, which exits non-zero on errors and on leaked
// clusters.
func check(t *testing.T, image string) {
	t.Helper()
	run(t, "qemu-img", "check", "-q", image)
}

func TestCreate_QEMUImgAgrees(t *testing.T) {
	requireQEMUTools(t)
	dir := t.TempDir()
	raw := filepath.Join(dir, "base.raw")
	if err := os.WriteFile(raw, bytes.Repeat([]byte{0x5a}, 1000001), 0o644); err != nil {
		t.Fatal(err)
	}
	qcow := filepath.Join(dir, "base.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", qcow, "17630208")

	for _, c := range []struct {
		name    string
		size    int64
		backing string
	}{
		{"empty, odd size", 1000001, ""},
		{"empty, 600 GiB", 600 << 30, ""},
		{"empty, 5 TiB (two L1 clusters)", 5 << 40, ""},
		{"over a raw image", 0, raw},
		{"over a qcow2 image", 0, qcow},
	} {
		t.Run(c.name, func(t *testing.T) {
			ours, theirs := filepath.Join(dir, "ours.qcow2"), filepath.Join(dir, "theirs.qcow2")
			args := []string{"create", "-q", "-f", "qcow2"}
			var b *Backing
			size := c.size
			if c.backing != "" {
				format, n, err := Probe(c.backing)
				if err != nil {
					t.Fatal(err)
				}
				size, b = n, &Backing{Path: c.backing, Format: format}
				args = append(args, "-F", format, "-b", c.backing, theirs)
			} else {
				args = append(args, theirs, fmt.Sprint(c.size))
			}
			if err := Create(ours, size, b); err != nil {
				t.Fatal(err)
			}
			run(t, "qemu-img", args...)
			check(t, ours)
			if got, want := info(t, ours), info(t, theirs); got != want {
				t.Errorf("qemu-img info:\n ours   %+v\n qemu's %+v", got, want)
			}
		})
	}
}

// TestCreate_GuestWritesStayInTheOverlay writes through QEMU's block layer
// (qemu-io) at the start and at the end of an overlay: the backing data
// reads through, writes read back, the base is untouched and the image
// stays consistent.
func TestCreate_GuestWritesStayInTheOverlay(t *testing.T) {
	requireQEMUTools(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.raw")
	const baseSize = 4 << 20
	if err := os.WriteFile(base, bytes.Repeat([]byte{0x5a}, baseSize), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "overlay.qcow2")
	if err := Create(overlay, baseSize, &Backing{Path: base, Format: FormatRaw}); err != nil {
		t.Fatal(err)
	}
	run(t, "qemu-io", "-f", "qcow2",
		"-c", "read -P 0x5a 0 4M",
		"-c", "write -P 0xab 64k 128k",
		"-c", "write -P 0xcd 4032k 64k",
		"-c", "read -P 0x5a 0 64k",
		"-c", "read -P 0xab 64k 128k",
		"-c", "read -P 0x5a 192k 3840k",
		"-c", "read -P 0xcd 4032k 64k",
		overlay)
	check(t, overlay)
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, bytes.Repeat([]byte{0x5a}, baseSize)) {
		t.Error("the backing image changed")
	}

	// An empty 5 TiB image written at its last cluster, whose L2 table
	// the second L1 cluster points to.
	big := filepath.Join(dir, "big.qcow2")
	const bigSize = 5 << 40
	if err := Create(big, bigSize, nil); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprint(bigSize - 64<<10)
	run(t, "qemu-io", "-f", "qcow2", "-c", "write -P 0x11 "+last+" 64k", "-c", "read -P 0x11 "+last+" 64k", "-c", "read -P 0 0 1M", big)
	check(t, big)
}

func TestCreate_ReplacesOnlyWhenComplete(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Create(path, 1<<20, &Backing{Path: "/disk.img", Format: "vmdk"})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Create with a bad backing format = %v, want an error naming %s", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != "keep" {
		t.Errorf("the file at the target became %q", b)
	}
	if err := Create(path, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	if f, _, err := Probe(path); err != nil || f != FormatQCOW2 {
		t.Errorf("after Create: %s, %v", f, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the image", len(entries))
	}
}

func TestProbe(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "odd.raw")
	if err := os.WriteFile(raw, make([]byte, 1000001), 0o644); err != nil {
		t.Fatal(err)
	}
	qcow := filepath.Join(dir, "disk.qcow2")
	if err := Create(qcow, 1000001, nil); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join(dir, "tiny.raw")
	if err := os.WriteFile(tiny, []byte("QF"), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.qcow2")
	if err := os.WriteFile(short, []byte("QFI\xfb\x00\x00\x00\x03"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, format string
		size         int64
		err          string
	}{
		{raw, FormatRaw, 1000001, ""},
		{tiny, FormatRaw, 2, ""},
		{qcow, FormatQCOW2, 1000448, ""},
		{short, "", 0, "cut short"},
		{filepath.Join(dir, "missing"), "", 0, "no such file"},
	} {
		format, size, err := Probe(c.path)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Probe(%s) = %v, want an error mentioning %q", c.path, err, c.err)
			}
		case err != nil || format != c.format || size != c.size:
			t.Errorf("Probe(%s) = %s, %d, %v; want %s, %d", c.path, format, size, err, c.format, c.size)
		}
	}
}
