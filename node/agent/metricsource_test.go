package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/qmp"
	"github.com/nodevirt/nodevirt/store"
)

func TestDiskName(t *testing.T) {
	disks := []launchspec.Device{
		{Kind: launchspec.DeviceDisk, Name: "rootdisk", ID: "disk-rootdisk", Node: "fmt-rootdisk"},
		{Kind: launchspec.DeviceDisk, Name: "cloudinit", ID: "disk-cloudinit", Node: "fmt-cloudinit"},
	}
	tests := []struct {
		name   string
		bs     qmp.BlockStats
		want   string
		wantOK bool
	}{
		{"qdev id", qmp.BlockStats{QDev: "disk-rootdisk"}, "rootdisk", true},
		{"qdev QOM path", qmp.BlockStats{QDev: "/machine/peripheral/disk-cloudinit/virtio-backend"}, "cloudinit", true},
		{"qdev prefix of another id", qmp.BlockStats{QDev: "/machine/peripheral/disk-rootdisk2/virtio-backend"}, "", false},
		{"node name", qmp.BlockStats{NodeName: "fmt-rootdisk"}, "rootdisk", true},
		{"drive id", qmp.BlockStats{Device: "disk-cloudinit"}, "cloudinit", true},
		{"unknown", qmp.BlockStats{QDev: "/machine/peripheral-anon/device[3]/virtio-backend"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := diskName(disks, tt.bs)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("diskName = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestTapsOf(t *testing.T) {
	rec := store.Record{Interfaces: []store.Interface{
		{Name: "default", Tap: "tap0"}, {Name: "pending"},
	}}
	if diff := cmp.Diff(map[string]string{"default": "tap0"}, tapsOf(rec)); diff != "" {
		t.Errorf("tapsOf (-want +got):\n%s", diff)
	}
}
