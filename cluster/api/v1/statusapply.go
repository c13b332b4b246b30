package v1

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// OwnedBy returns the fields of s that manager writes according to
// [StatusOwnership], as JSON ready for a server-side apply body. Map-list
// entries (conditions, phaseTransitionTimestamps) are kept one by one by
// their key. Nulls and empty objects are dropped: an apply that omits a
// field its manager applied before removes it, which is what a writer
// clearing its own field means.
func (s *VirtualMachineInstanceStatus) OwnedBy(manager string) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode vmi status: %w", err)
	}
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("decode vmi status: %w", err)
	}
	out, _ := project(all, ownedPaths(KindVMI, manager)).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	return out, nil
}

// StatusApply returns the server-side apply body that writes the fields of
// s owned by manager on vmi's status subresource. The body carries vmi's
// resourceVersion (when set) as a precondition: a writer acting on a stale
// view gets a Conflict instead of overwriting a newer status.
func StatusApply(vmi *VirtualMachineInstance, s VirtualMachineInstanceStatus, manager string) ([]byte, error) {
	status, err := s.OwnedBy(manager)
	if err != nil {
		return nil, fmt.Errorf("status of vmi %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	meta := map[string]any{"name": vmi.Name, "namespace": vmi.Namespace}
	if vmi.ResourceVersion != "" {
		meta["resourceVersion"] = vmi.ResourceVersion
	}
	if vmi.UID != "" {
		meta["uid"] = vmi.UID
	}
	return json.Marshal(map[string]any{
		"apiVersion": SchemeGroupVersion.String(),
		"kind":       KindVMI,
		"metadata":   meta,
		"status":     status,
	})
}

// project keeps the parts of v named by paths ("a.b", "list[key=value]");
// an empty path keeps v whole. Nulls and empty objects are dropped.
func project(v any, paths []string) any {
	for _, p := range paths {
		if p == "" {
			return prune(v)
		}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := map[string]any{}
	for key, val := range obj {
		var rest []string
		var entries []string // "key=value" selectors on a map list
		for _, p := range paths {
			head, tail, _ := strings.Cut(p, ".")
			name, sel, isList := strings.Cut(strings.TrimSuffix(head, "]"), "[")
			if name != key {
				continue
			}
			if isList {
				entries = append(entries, sel)
			} else {
				rest = append(rest, tail)
			}
		}
		var kept any
		switch {
		case len(rest) > 0:
			kept = project(val, rest)
		case len(entries) > 0:
			kept = selectEntries(val, entries)
		}
		if kept != nil {
			out[key] = kept
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// selectEntries keeps the entries of list whose key field has one of the
// values in selectors ("key=value").
func selectEntries(list any, selectors []string) any {
	items, ok := list.([]any)
	if !ok {
		return nil
	}
	var out []any
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		for _, sel := range selectors {
			k, want, _ := strings.Cut(sel, "=")
			if m[k] == want {
				out = append(out, prune(m))
				break
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// prune drops nulls and empty objects below v.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, val := range t {
			if p := prune(val); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for _, val := range t {
			if p := prune(val); p != nil {
				out = append(out, p)
			}
		}
		return out
	}
	return v
}

// StatusPatcher is what ApplyStatus needs of a VMI client (the generated
// typed client satisfies it).
type StatusPatcher interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*VirtualMachineInstance, error)
}

// ApplyStatus writes the fields of s that manager owns to vmi's status
// subresource by server-side apply, forced (the table, not the API server,
// arbitrates between writers), with vmi's resourceVersion as precondition.
func ApplyStatus(ctx context.Context, p StatusPatcher, vmi *VirtualMachineInstance, s VirtualMachineInstanceStatus, manager string) error {
	_, err := ApplyStatusResult(ctx, p, vmi, s, manager)
	return err
}

// ApplyStatusResult is ApplyStatus that also returns the VMI as the API
// server has it after the apply (an apply that changed nothing keeps the
// resourceVersion).
func ApplyStatusResult(ctx context.Context, p StatusPatcher, vmi *VirtualMachineInstance, s VirtualMachineInstanceStatus, manager string) (*VirtualMachineInstance, error) {
	body, err := StatusApply(vmi, s, manager)
	if err != nil {
		return nil, err
	}
	out, err := p.Patch(ctx, vmi.Name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: manager, Force: ptr.To(true)}, "status")
	if err != nil {
		return nil, fmt.Errorf("apply status of vmi %s/%s as %s: %w", vmi.Namespace, vmi.Name, manager, err)
	}
	return out, nil
}
