package launchspec

import "strings"

// Accelerator is the accelerator QEMU's -accel option names ("kvm",
// "tcg"), without its properties; "" when Args have none.
func (s *Spec) Accelerator() string {
	for i := 0; i+1 < len(s.Args); i++ {
		if s.Args[i] == "-accel" {
			name, _, _ := strings.Cut(s.Args[i+1], ",")
			return name
		}
	}
	return ""
}
