package launchspec

import "testing"

func TestSpec_Accelerator(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-machine", "q35", "-accel", "kvm", "-cpu", "host"}, "kvm"},
		{[]string{"-accel", "tcg,tb-size=64", "-cpu", "max"}, "tcg"},
		{[]string{"-machine", "q35"}, ""},
		{[]string{"-accel"}, ""},
	} {
		s := Spec{Args: tc.args}
		if got := s.Accelerator(); got != tc.want {
			t.Errorf("Accelerator(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
