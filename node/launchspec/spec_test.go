package launchspec

import (
	"errors"
	"testing"
)

func TestSealVerify(t *testing.T) {
	s := Spec{VMI: VMIRef{Namespace: "ns", Name: "vm", UID: "u"}, Args: []string{"-S"}, GracePeriodSeconds: 30,
		Disks: []DiskPrep{{Volume: "e", Kind: EmptyDisk, Target: "/p/empty/e.img", Format: "raw", SizeBytes: 1}}}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	if s.Version != Version || len(s.Hash) != 64 {
		t.Fatalf("sealed spec = %+v", s)
	}
	if err := s.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Spec)
	}{
		{"changed args", func(s *Spec) { s.Args = append(s.Args, "-x") }},
		{"version", func(s *Spec) { s.Version = 99 }},
		{"relative target", func(s *Spec) { s.Disks[0].Target = "p/e.img" }},
		{"unclean target", func(s *Spec) { s.Disks[0].Target = "/p/../e.img" }},
		{"zero size", func(s *Spec) { s.Disks[0].SizeBytes = 0 }},
		{"unknown kind", func(s *Spec) { s.Disks[0].Kind = "x" }},
		{"negative grace", func(s *Spec) { s.GracePeriodSeconds = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s
			c.Args = append([]string(nil), s.Args...)
			c.Disks = append([]DiskPrep(nil), s.Disks...)
			tt.mutate(&c)
			if tt.name != "changed args" {
				_ = c.Seal() // the hash matches; the content is what is wrong
			}
			if err := c.Verify(); !errors.Is(err, ErrInvalid) {
				t.Errorf("Verify = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestVerify_PVCDisks(t *testing.T) {
	good := []DiskPrep{
		{Volume: "fs", Kind: PVCFile, Target: "/v/fs/disk.img", Format: "raw", SizeBytes: 1 << 20},
		{Volume: "fs", Kind: PVCFile, Target: "/v/fs/disk.img", Format: "raw"}, // must exist
		{Volume: "b", Kind: PVCBlock, Target: "/dev/nodevirt/b", ReadOnly: true},
	}
	bad := []DiskPrep{
		{Volume: "fs", Kind: PVCFile, Target: "/v/fs/disk.img", Format: "qcow2", SizeBytes: 1},
		{Volume: "fs", Kind: PVCFile, Target: "/v/fs/other.img", Format: "raw", SizeBytes: 1},
		{Volume: "fs", Kind: PVCFile, Target: "/v/fs/disk.img", Format: "raw", SizeBytes: -1},
		{Volume: "b", Kind: PVCBlock, Target: "/dev/nodevirt/b", SizeBytes: 1},
	}
	for i, d := range append(good, bad...) {
		s := Spec{Args: []string{"-S"}, Disks: []DiskPrep{d}}
		if err := s.Seal(); err != nil {
			t.Fatal(err)
		}
		if err := s.Verify(); (err == nil) != (i < len(good)) {
			t.Errorf("Verify(%+v) = %v, want ok=%v", d, err, i < len(good))
		}
	}
}

func TestCheckVolumeName(t *testing.T) {
	for name, ok := range map[string]bool{"root": true, "a.b-c_d": true, "": false, ".": false, "..": false, "a/b": false, "a\x00": false} {
		if err := CheckVolumeName(name); (err == nil) != ok {
			t.Errorf("CheckVolumeName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}
