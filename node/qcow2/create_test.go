package qcow2

import (
	"encoding/binary"
	"strings"
	"testing"
)

func TestPlan_EmptyOverlayLayout(t *testing.T) {
	m, err := plan(1000001, &Backing{Path: "/disk/disk.img", Format: FormatRaw})
	if err != nil {
		t.Fatal(err)
	}
	be := binary.BigEndian
	h := m.header
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"version", uint64(be.Uint32(h[4:])), 3},
		{"cluster bits", uint64(be.Uint32(h[20:])), 16},
		{"size (rounded up to 512)", be.Uint64(h[24:]), 1000448},
		{"L1 entries", uint64(be.Uint32(h[36:])), 1},
		{"L1 offset", be.Uint64(h[40:]), 3 << 16},
		{"refcount table offset", be.Uint64(h[48:]), 1 << 16},
		{"refcount order", uint64(be.Uint32(h[96:])), 4},
		{"header length", uint64(be.Uint32(h[100:])), 112},
		{"backing name length", uint64(be.Uint32(h[16:])), uint64(len("/disk/disk.img"))},
		{"file length", uint64(m.length), 3<<16 + 8},
		{"refcount table entry", be.Uint64(m.refcountTable), 2 << 16},
		{"clusters counted", uint64(len(m.refcountBlock) / 2), 4},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	off := be.Uint64(h[8:])
	if got := string(h[off:]); got != "/disk/disk.img" {
		t.Errorf("backing name at %d = %q", off, got)
	}
	if got := string(h[112+8 : 112+8+3]); got != "raw" {
		t.Errorf("backing format extension holds %q", got)
	}
}

func TestPlan_LargeImagesSpanL1Clusters(t *testing.T) {
	m, err := plan(5<<40, nil) // 10240 L1 entries: 80 KiB, two clusters
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.refcountBlock) / 2; got != 5 {
		t.Errorf("clusters counted = %d, want 5", got)
	}
	if m.length != 3<<16+10240*8 {
		t.Errorf("length = %d", m.length)
	}
	if _, err := plan(MaxSize, nil); err != nil {
		t.Errorf("MaxSize: %v", err)
	}
}

func TestPlan_Refuses(t *testing.T) {
	for _, c := range []struct {
		size    int64
		b       *Backing
		mention string
	}{
		{0, nil, "virtual size 0"},
		{-1, nil, "virtual size -1"},
		{MaxSize + 1, nil, "above qcow2's"},
		{1 << 20, &Backing{Path: "/d", Format: "vmdk"}, `backing format "vmdk"`},
		{1 << 20, &Backing{Path: "disk.img", Format: FormatRaw}, "not an absolute path"},
		{1 << 20, &Backing{Path: "/" + strings.Repeat("a", 1023), Format: FormatRaw}, "above QEMU's 1023"},
		{1 << 20, &Backing{Path: "/a\x00b", Format: FormatRaw}, "NUL"},
	} {
		_, err := plan(c.size, c.b)
		if err == nil || !strings.Contains(err.Error(), c.mention) {
			t.Errorf("plan(%d, %+v) = %v, want an error mentioning %q", c.size, c.b, err, c.mention)
		}
	}
}
