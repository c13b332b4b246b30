package convert

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestDetectKVM(t *testing.T) {
	file := &fstest.MapFile{}
	dir := &fstest.MapFile{Mode: 0o755 | 1<<31}
	tests := []struct {
		name  string
		files fstest.MapFS
		want  bool
	}{
		{"no dev/kvm", fstest.MapFS{"sys/module/kvm_intel": dir}, false},
		{"kvm_pvm", fstest.MapFS{"dev/kvm": file, "sys/module/kvm_pvm": dir, "sys/module/kvm": dir}, false},
		{"kvm_pvm beside kvm_intel", fstest.MapFS{"dev/kvm": file, "sys/module/kvm_pvm": dir, "sys/module/kvm_intel": dir}, false},
		{"kvm_intel", fstest.MapFS{"dev/kvm": file, "sys/module/kvm_intel": dir}, true},
		{"kvm_amd", fstest.MapFS{"dev/kvm": file, "sys/module/kvm_amd": dir}, true},
		{"unknown backend", fstest.MapFS{"dev/kvm": file, "sys/module/kvm": dir}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DetectKVM(tt.files)
			if diff := cmp.Diff(tt.want, got.Usable); diff != "" || got.Reason == "" {
				t.Errorf("DetectKVM = %+v, want usable=%v and a reason", got, tt.want)
			}
		})
	}
}
