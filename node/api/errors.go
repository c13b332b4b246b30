package api

import (
	"errors"
	"net/http"
)

// Errors a Domains implementation wraps so the API can map them to status
// codes.
var (
	// ErrNoDomain: no live record for the VMI on this node.
	ErrNoDomain = errors.New("no such domain on this node")
	// ErrNotRunning: the domain has no QEMU the agent is attached to.
	ErrNotRunning = errors.New("domain is not running")
	// ErrNoGuestAgent: the guest agent is not connected.
	ErrNoGuestAgent = errors.New("guest agent is not connected")
	// ErrPaused: the request needs a running guest and the VMI is paused.
	ErrPaused = errors.New("VMI is paused")
	// ErrBusy: another soft reboot of the VMI is under way.
	ErrBusy = errors.New("a soft reboot of the VMI is already under way")
	// ErrMigrating: the request cannot be served while the VMI migrates
	// (a freeze: the target would not know to thaw the guest).
	ErrMigrating = errors.New("the VMI is migrating")
	// ErrNoGraphics: the VMI has no graphics device (VNC, screenshot).
	ErrNoGraphics = errors.New("no graphics devices are present")
	// ErrNoGuestAddress: port-forward to a VMI without a pod network
	// address.
	ErrNoGuestAddress = errors.New("the VMI has no pod network address to forward to")
	// ErrTimeout: the guest did not do its part in time (the ACPI power
	// button of a soft reboot was ignored).
	ErrTimeout = errors.New("the guest did not react in time")
)

// httpStatus maps an error of a Domains or Records call to a status code.
func httpStatus(err error) int {
	var be badRequest
	switch {
	case errors.As(err, &be), errors.Is(err, ErrNoGraphics), errors.Is(err, ErrNoGuestAddress):
		return http.StatusBadRequest
	case errors.Is(err, ErrNoDomain), errors.Is(err, errNoRecord):
		return http.StatusNotFound
	case errors.Is(err, ErrNotRunning), errors.Is(err, ErrNoGuestAgent), errors.Is(err, ErrPaused), errors.Is(err, ErrBusy),
		errors.Is(err, ErrMigrating):
		return http.StatusConflict
	case errors.Is(err, ErrTimeout):
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// badRequest is a request the API refuses before asking the agent: a
// malformed path or query parameter, named in the message.
type badRequest string

func (e badRequest) Error() string { return string(e) }
