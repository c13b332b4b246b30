package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseEntry(t *testing.T) {
	tests := []struct {
		in      string
		want    Entry
		wantErr bool
	}{
		{in: "/usr/bin/qemu-img=/usr/bin/qemu-img", want: Entry{Src: "/usr/bin/qemu-img", Dst: "/usr/bin/qemu-img"}},
		{in: "out/pause=/pause", want: Entry{Src: "out/pause", Dst: "/pause"}},
		{in: "a=/x/../y/", want: Entry{Src: "a", Dst: "/y"}},
		{in: "a=relative", wantErr: true},
		{in: "=/x", wantErr: true},
		{in: "noequals", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseEntry(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseEntry(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseEntry(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseOwner(t *testing.T) {
	tests := []struct {
		in      string
		want    Owner
		wantErr bool
	}{
		{in: "107:107", want: Owner{UID: 107, GID: 107}},
		{in: "0:5", want: Owner{GID: 5}},
		{in: "107", wantErr: true},
		{in: "a:b", wantErr: true},
		{in: "-1:0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseOwner(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseOwner(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseOwner(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseLdd(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		wantErr bool
	}{
		{
			name: "Dynamic",
			in: "\tlinux-vdso.so.1 (0x00007ffd)\n" +
				"\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f1)\n" +
				"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n" +
				"\t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n",
			want: []string{"/lib/x86_64-linux-gnu/libz.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"},
		},
		{name: "NotFound", in: "\tlibfoo.so.1 => not found\n", wantErr: true},
		{name: "Empty", in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseLdd(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseLdd() error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseLdd() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
