package netsetup

import (
	"fmt"
	"os"
)

// ensureSysctl writes val to a /proc/sys file of the thread's netns.
func ensureSysctl(path, val string) (bool, error) {
	cur, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	if string(cur) == val+"\n" || string(cur) == val {
		return false, nil
	}
	if err := os.WriteFile(path, []byte(val), 0o644); err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, nil
}
