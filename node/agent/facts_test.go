package agent

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/status"
	"github.com/nodevirt/nodevirt/store"
)

func TestFacts_Domain(t *testing.T) {
	tests := []struct {
		name       string
		o          *Observation
		wantDomain status.Domain
		wantOK     bool
	}{
		{"NotAttachedYetReportsNothing", obs(v1.Running, withRecord, withLauncher(launcher.StateRunning)), status.DomainUnknown, false},
		{"Running", obs(v1.Scheduled, withQEMU), status.DomainRunning, true},
		{"Paused", obs(v1.Running, withQEMU, func(o *Observation) { o.Runtime.RunState = "paused" }), status.DomainPaused, true},
		{"GuestShutdown", obs(v1.Running, withQEMU, exited(true)), status.DomainShutdown, true},
		{"Crash", obs(v1.Running, withQEMU, exited(false)), status.DomainCrashed, true},
		{"LauncherAndQEMUGone", obs(v1.Running, withQEMU, func(o *Observation) {
			o.Launcher, o.Runtime = LauncherView{}, RuntimeView{}
		}), status.DomainLost, true},
		{"PodGone", obs(v1.Running, withRecord, func(o *Observation) { o.Pod = nil }), status.DomainLost, true},
		{"MigratedOutTargetLost", obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migCompleted), runState("postmigrate"),
			func(o *Observation) { delete(o.VMI.Labels, v1.MigrationTargetNodeNameLabel) }), status.DomainLost, true},
		{"MigratedOutAwaitingTheTarget", obs(v1.Running, withQEMU, outgoingFrom, sourceRec(migCompleted), runState("postmigrate")),
			status.DomainRunning, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := facts(tt.o)
			if f.Domain != tt.wantDomain || ok != tt.wantOK {
				t.Errorf("facts = %q, %v; want %q, %v", f.Domain, ok, tt.wantDomain, tt.wantOK)
			}
		})
	}
}

func TestFacts_AgentConnectedKeptUntilProbed(t *testing.T) {
	o := obs(v1.Running, withQEMU, func(o *Observation) {
		o.VMI.Status.Conditions = []v1.VirtualMachineInstanceCondition{
			{Type: v1.VirtualMachineInstanceAgentConnected, Status: "True"},
		}
	})
	if f, _ := facts(o); !f.AgentConnected {
		t.Errorf("before the first probe AgentConnected = false, want the status' true")
	}
	o.Runtime.AgentProbed = true
	if f, _ := facts(o); f.AgentConnected {
		t.Errorf("after a failed probe AgentConnected = true, want false")
	}
}

func TestFacts_BridgeNotMigratable(t *testing.T) {
	o := obs(v1.Running, withQEMU, func(o *Observation) {
		o.Record.Interfaces = []store.Interface{{
			Name: "default", Binding: bindingBridge, MAC: "02:00:00:00:00:01",
			IPs: []netip.Prefix{netip.MustParsePrefix("10.244.0.7/24")},
		}}
	})
	f, ok := facts(o)
	if !ok || f.NotMigratableReason != v1.ReasonInterfaceNotLiveMigratable {
		t.Errorf("facts = %+v, %v; want InterfaceNotLiveMigratable", f, ok)
	}
	want := []v1.VirtualMachineInstanceNetworkInterface{{
		Name: "default", MAC: "02:00:00:00:00:01", IPAddress: "10.244.0.7",
		IPAddresses: []string{"10.244.0.7"}, InterfaceName: "eth0", InfoSource: "domain",
	}}
	if diff := cmp.Diff(want, f.Interfaces); diff != "" {
		t.Errorf("interfaces (-want +got):\n%s", diff)
	}
}

func TestPodInterfaces(t *testing.T) {
	vmi := func(ifs []v1.Interface, nets []v1.Network, auto *bool) *v1.VirtualMachineInstance {
		v := obs(v1.Scheduled).VMI
		v.Spec.Domain.Devices.Interfaces = ifs
		v.Spec.Domain.Devices.AutoattachPodInterface = auto
		v.Spec.Networks = nets
		return v
	}
	pod := []v1.Network{{Name: "default", Pod: &v1.PodNetwork{}}}
	tests := []struct {
		name string
		vmi  *v1.VirtualMachineInstance
		want []string // name/binding
	}{
		{"DefaultIsBridge", vmi(nil, nil, nil), []string{"default/bridge"}},
		{"AutoattachOff", vmi(nil, nil, new(bool)), nil},
		{"Masquerade", vmi([]v1.Interface{{Name: "default", Masquerade: &v1.InterfaceMasquerade{}}}, pod, nil), []string{"default/masquerade"}},
		{"NoNetworkNoNIC", vmi([]v1.Interface{{Name: "other", Bridge: &v1.InterfaceBridge{}}}, pod, nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, in := range podInterfaces(tt.vmi) {
				got = append(got, in.InterfaceName+"/"+string(in.Binding))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("podInterfaces (-want +got):\n%s", diff)
			}
			ifs, err := allocate(tt.vmi)
			if err != nil || len(ifs) != len(tt.want) {
				t.Errorf("allocate = %v, %v", ifs, err)
			}
		})
	}
}

func TestExitReason(t *testing.T) {
	for _, tc := range []struct {
		e    launcher.Exit
		want string
	}{
		{launcher.Exit{Code: -1, Reason: "launch-failed", Error: "spec.domain.devices.tpm: x"}, "the launch failed: spec.domain.devices.tpm: x"},
		{launcher.Exit{Code: 1, Reason: "host-error"}, "QEMU exited with code 1 after host-error"},
		{launcher.Exit{Code: -1, Signal: "killed"}, "QEMU was terminated by a signal (killed)"},
		{launcher.Exit{Code: 2}, "QEMU exited with code 2"},
	} {
		if got := exitReason(&tc.e); got != tc.want {
			t.Errorf("exitReason(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}

func TestFacts_Accelerator(t *testing.T) {
	for args, want := range map[string]v1.Accelerator{
		`["-accel","kvm","-cpu","host"]`:           v1.AcceleratorKVM,
		`["-accel","tcg,tb-size=64","-cpu","max"]`: v1.AcceleratorTCG,
		`["-machine","q35"]`:                       "",
	} {
		o := obs(v1.Running, withQEMU, func(o *Observation) {
			o.Record.Spec = json.RawMessage(`{"version":1,"args":` + args + `}`)
		})
		if f, _ := facts(o); f.Accelerator != want {
			t.Errorf("spec args %s: accelerator %q, want %q", args, f.Accelerator, want)
		}
	}
	// Once the status has it, the spec is not read again.
	o := obs(v1.Running, withQEMU, func(o *Observation) {
		o.Record.Spec = json.RawMessage(`{"version":1,"args":["-accel","kvm"]}`)
		o.VMI.Status.Accelerator = v1.AcceleratorTCG
	})
	if f, _ := facts(o); f.Accelerator != "" {
		t.Errorf("status already says TCG: facts accelerator %q, want none (kept)", f.Accelerator)
	}
	if got := recordAccelerator(json.RawMessage(`not json`)); got != "" {
		t.Errorf("unreadable spec: accelerator %q, want none", got)
	}
}
