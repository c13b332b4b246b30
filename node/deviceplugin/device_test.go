package deviceplugin

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/nodevirt/nodevirt/node/launchspec/convert"
)

var (
	node = &fstest.MapFile{Mode: 0o666}
	dir  = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
)

func TestHostDevices(t *testing.T) {
	tests := []struct {
		name string
		host fstest.MapFS
		want []Device
	}{
		{
			name: "ThisMachineKind", // kvm_pvm, tun, no vhost-net
			host: fstest.MapFS{"dev/kvm": node, "sys/module/kvm": dir, "sys/module/kvm_pvm": dir, "dev/net/tun": node},
			want: []Device{Tun()},
		},
		{
			name: "PVMBesideIntel",
			host: fstest.MapFS{"dev/kvm": node, "sys/module/kvm_intel": dir, "sys/module/kvm_pvm": dir, "dev/net/tun": node},
			want: []Device{Tun()},
		},
		{
			name: "Everything",
			host: fstest.MapFS{"dev/kvm": node, "sys/module/kvm_intel": dir, "dev/net/tun": node, "dev/vhost-net": node},
			want: []Device{KVM(), Tun(), VhostNet()},
		},
		{
			name: "KVMOnAMD",
			host: fstest.MapFS{"dev/kvm": node, "sys/module/kvm_amd": dir},
			want: []Device{KVM()},
		},
		{name: "Nothing", host: fstest.MapFS{}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The agent's composition: the launch-spec builder's KVM check
			// decides whether kvm is offered.
			kvm := convert.DetectKVM(tt.host)
			if diff := cmp.Diff(tt.want, HostDevices(tt.host, kvm.Usable)); diff != "" {
				t.Errorf("HostDevices() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"Zero", Config{}, false},
		{"Set", Config{Dir: "/var/lib/kubelet/device-plugins", Count: 5}, false},
		{"RelativeDir", Config{Dir: "device-plugins"}, true},
		{"NegativeCount", Config{Count: -1}, true},
		{"NegativeInterval", Config{PollInterval: -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}
