package vm

import (
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// statusPatch is the JSON merge patch that turns vm's status into status:
// only changed fields, plus metadata.resourceVersion as a precondition
// (and metadata.uid, so a VM recreated under the same name is not patched).
func statusPatch(vm *v1.VirtualMachine, status v1.VirtualMachineStatus) ([]byte, error) {
	from, err := json.Marshal(map[string]any{"status": vm.Status})
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("diff status: %w", err)
	}
	var patch map[string]any
	if err := json.Unmarshal(diff, &patch); err != nil {
		return nil, err
	}
	meta := map[string]any{}
	if vm.ResourceVersion != "" {
		meta["resourceVersion"] = vm.ResourceVersion
	}
	if vm.UID != "" {
		meta["uid"] = vm.UID
	}
	if len(meta) > 0 {
		patch["metadata"] = meta
	}
	return json.Marshal(patch)
}
