package deviceplugin

import (
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

var (
	node = &fstest.MapFile{Mode: 0o666}
	dir  = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
)

func TestDetectKVM(t *testing.T) {
	tests := []struct {
		name string
		host fstest.MapFS
		want bool
	}{
		{"NoDevice", fstest.MapFS{"sys/module/kvm_intel": dir}, false},
		{"PVM", fstest.MapFS{"dev/kvm": node, "sys/module/kvm": dir, "sys/module/kvm_pvm": dir}, false},
		{"PVMBesideIntel", fstest.MapFS{"dev/kvm": node, "sys/module/kvm_pvm": dir, "sys/module/kvm_intel": dir}, false},
		{"Intel", fstest.MapFS{"dev/kvm": node, "sys/module/kvm": dir, "sys/module/kvm_intel": dir}, true},
		{"AMD", fstest.MapFS{"dev/kvm": node, "sys/module/kvm_amd": dir}, true},
		{"UnknownBackend", fstest.MapFS{"dev/kvm": node, "sys/module/kvm": dir}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DetectKVM(tt.host)
			if got.Usable != tt.want || got.Reason == "" {
				t.Errorf("DetectKVM() = %+v, want Usable=%v with a reason", got, tt.want)
			}
		})
	}
}

func TestHostDevices(t *testing.T) {
	tests := []struct {
		name string
		host fstest.MapFS
		kvm  KVMStatus
		want []Device
	}{
		{
			name: "ThisMachineKind", // kvm_pvm, tun, no vhost-net
			host: fstest.MapFS{"dev/kvm": node, "dev/net/tun": node},
			kvm:  KVMStatus{Reason: "kvm_pvm"},
			want: []Device{Tun()},
		},
		{
			name: "Everything",
			host: fstest.MapFS{"dev/kvm": node, "dev/net/tun": node, "dev/vhost-net": node},
			kvm:  KVMStatus{Usable: true},
			want: []Device{KVM(), Tun(), VhostNet()},
		},
		{name: "Nothing", host: fstest.MapFS{}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, HostDevices(tt.host, tt.kvm)); diff != "" {
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
