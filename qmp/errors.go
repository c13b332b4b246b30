package qmp

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrClosed is returned by every call on a Conn or Agent that was closed,
	// whether by Close or because the peer went away; calls that were waiting
	// when that happened return it too.
	ErrClosed = errors.New("qmp: connection closed")

	// ErrGreeting is returned by Dial when QEMU does not send a valid QMP
	// greeting (or capability negotiation fails) before the context ends.
	ErrGreeting = errors.New("qmp: no valid greeting")

	// ErrProtocol wraps a reply that could not be parsed.
	ErrProtocol = errors.New("qmp: protocol error")
)

// Error classes QEMU and qemu-ga report (the "class" member of an error reply).
const (
	ClassGenericError    = "GenericError"
	ClassCommandNotFound = "CommandNotFound"
	ClassDeviceNotActive = "DeviceNotActive"
	ClassDeviceNotFound  = "DeviceNotFound"
	ClassKVMMissingCap   = "KVMMissingCap"
)

// Error is an error reply from QEMU or the guest agent. Class is QEMU's error
// class (see the Class* constants); Desc is its human-readable description.
// Callers decide on Class, never on Desc.
type Error struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", e.Class, e.Desc)
}

// IsClass reports whether err is (or wraps) a *Error of the given class.
func IsClass(err error, class string) bool {
	var qe *Error
	return errors.As(err, &qe) && qe.Class == class
}
