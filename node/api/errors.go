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
)

// httpStatus maps an error of a Domains or Records call to a status code.
func httpStatus(err error) int {
	switch {
	case errors.Is(err, ErrNoDomain), errors.Is(err, errNoRecord):
		return http.StatusNotFound
	case errors.Is(err, ErrNotRunning), errors.Is(err, ErrNoGuestAgent):
		return http.StatusConflict
	}
	return http.StatusBadGateway
}
