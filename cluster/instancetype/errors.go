package instancetype

import (
	"errors"
	"fmt"
	"strings"
)

// Conflicts are the VM template fields the instancetype also decides (paths
// like spec.template.spec.domain.cpu.sockets). KubeVirt refuses such a VM;
// nodevirt reports it on the VM and creates no VMI.
type Conflicts []string

func (c Conflicts) Error() string {
	return fmt.Sprintf("VM field(s) %s conflicts with selected instance type", strings.Join(c, ", "))
}

// Permanent reports that retrying cannot help: the VM must change.
func (Conflicts) Permanent() bool { return true }

// RequirementError is a preference requirement the instancetype or the VM
// does not meet; Field names what falls short.
type RequirementError struct {
	Field   string
	Message string
}

func (e *RequirementError) Error() string { return e.Message }

// Permanent reports that retrying cannot help.
func (*RequirementError) Permanent() bool { return true }

// ErrNotFound is wrapped by errors about a referenced instancetype,
// preference or ControllerRevision that does not exist.
var ErrNotFound = errors.New("not found")

// NotFoundError names the missing object; it wraps ErrNotFound.
type NotFoundError struct {
	// Kind is the object's kind (VirtualMachineInstancetype,
	// ControllerRevision…), Name its name, Namespace empty for cluster
	// scoped kinds.
	Kind, Namespace, Name string
}

func (e *NotFoundError) Error() string {
	if e.Namespace == "" {
		return fmt.Sprintf("%s %q not found", e.Kind, e.Name)
	}
	return fmt.Sprintf("%s %s/%s not found", e.Kind, e.Namespace, e.Name)
}

func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// KindError is a spec.instancetype.kind or spec.preference.kind nodevirt
// does not know.
type KindError struct {
	Field, Kind string
}

func (e *KindError) Error() string {
	return fmt.Sprintf("%s: unexpected kind %q", e.Field, e.Kind)
}

// Permanent reports that retrying cannot help.
func (*KindError) Permanent() bool { return true }

// Permanent is false: the object may yet be created; the VM controller
// retries.
func (*NotFoundError) Permanent() bool { return false }
