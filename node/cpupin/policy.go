package cpupin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// StateFile is the kubelet's CPU manager checkpoint, relative to the
// kubelet root directory.
const StateFile = "cpu_manager_state"

// StaticPolicy reports whether the kubelet under kubeletRoot runs the
// static CPU manager policy, the one that gives Guaranteed pods with whole
// CPUs exclusive CPUs. No state file (the kubelet has not written one yet,
// or runs no CPU manager) means no.
func StaticPolicy(kubeletRoot string) (bool, error) {
	raw, err := os.ReadFile(filepath.Join(kubeletRoot, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("kubelet CPU manager state: %w", err)
	}
	var state struct {
		PolicyName string `json:"policyName"`
	}
	if err := json.Unmarshal(raw, &state); err != nil {
		return false, fmt.Errorf("kubelet CPU manager state %s: %w", filepath.Join(kubeletRoot, StateFile), err)
	}
	return state.PolicyName == "static", nil
}
