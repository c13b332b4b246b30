package metrics

import (
	"os"
	"testing"
	"time"
)

func TestVCPUID(t *testing.T) {
	tests := []struct {
		comm, id string
		ok       bool
	}{
		{"CPU 0/TCG", "0", true},
		{"CPU 12/KVM", "12", true},
		{"CPU x/KVM", "", false},
		{"CPU 1/HVF", "", false},
		{"qemu-system-x86", "", false},
		{"IO mon_iothread", "", false},
	}
	for _, tt := range tests {
		id, ok := vcpuID(tt.comm)
		if id != tt.id || ok != tt.ok {
			t.Errorf("vcpuID(%q) = %q, %v; want %q, %v", tt.comm, id, ok, tt.id, tt.ok)
		}
	}
}

func TestProcessCPUAndRSS_Self(t *testing.T) {
	// Burn CPU until the kernel has accounted a tick of it (utime and
	// stime count in 1/USER_HZ steps), with a deadline.
	var cpu CPU
	deadline := time.Now().Add(5 * time.Second)
	for sink := 0; ; sink++ {
		if sink%1_000_000 != 0 {
			continue
		}
		var err error
		if cpu, err = ProcessCPU("/proc", os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if cpu.UsageSeconds > 0 || time.Now().After(deadline) {
			break
		}
	}
	if cpu.UsageSeconds <= 0 {
		t.Errorf("UsageSeconds = %v after 5 s of spinning, want > 0", cpu.UsageSeconds)
	}
	if len(cpu.VCPUs) != 0 {
		t.Errorf("VCPUs = %v, want none in the test binary", cpu.VCPUs)
	}
	rss, err := ProcessRSS("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss < 1<<20 {
		t.Errorf("RSS = %d, want > 1 MiB", rss)
	}
}
