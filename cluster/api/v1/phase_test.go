package v1_test

import (
	"testing"

	"k8s.io/utils/ptr"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

func TestPhase_CanTransitionTo(t *testing.T) {
	tests := []struct {
		from, to v1.VirtualMachineInstancePhase
		want     bool
	}{
		{v1.VmPhaseUnset, v1.Pending, true},
		{v1.Pending, v1.Scheduling, true},
		{v1.Pending, v1.Scheduled, true},
		{v1.Scheduling, v1.Scheduled, true},
		{v1.Scheduling, v1.Running, true}, // the agent's takeover
		{v1.Scheduling, v1.Succeeded, false},
		{v1.Scheduled, v1.Running, true},
		{v1.Running, v1.Succeeded, true},
		{v1.Running, v1.Failed, true},
		{v1.Running, v1.Running, true},
		{v1.Pending, v1.Running, false},
		{v1.Running, v1.Scheduled, false},
		{v1.Succeeded, v1.Running, false},
		{v1.Failed, v1.Succeeded, false},
		{v1.Failed, v1.Failed, true},
	}
	for _, tt := range tests {
		if got := tt.from.CanTransitionTo(tt.to); got != tt.want {
			t.Errorf("%q → %q: got %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}

func TestEffectiveRunStrategy(t *testing.T) {
	tests := []struct {
		name string
		spec v1.VirtualMachineSpec
		want v1.VirtualMachineRunStrategy
	}{
		{"neither", v1.VirtualMachineSpec{}, v1.RunStrategyHalted},
		{"running true", v1.VirtualMachineSpec{Running: ptr.To(true)}, v1.RunStrategyAlways},
		{"running false", v1.VirtualMachineSpec{Running: ptr.To(false)}, v1.RunStrategyHalted},
		{"runStrategy", v1.VirtualMachineSpec{RunStrategy: ptr.To(v1.RunStrategyManual)}, v1.RunStrategyManual},
	}
	for _, tt := range tests {
		if got := tt.spec.EffectiveRunStrategy(); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
