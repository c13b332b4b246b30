package api

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// action handles PUT .../{pause|unpause|softreboot|reset|freeze|unfreeze}.
// freeze takes an optional FreezeOptions body (freeze.go).
func (s *Server) action(name string) uidHandler {
	return func(w http.ResponseWriter, r *http.Request, uid string) {
		timeout := s.cfg.CallTimeout
		if name == "softreboot" {
			timeout = s.cfg.SoftRebootTimeout
		}
		var freezeFor time.Duration
		if name == "freeze" {
			var err error
			if freezeFor, err = unfreezeTimeout(r); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := s.do(ctx, name, uid, freezeFor); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// do runs one lifecycle action on the VMI uid; freezeFor is a freeze's
// unfreeze timeout.
func (s *Server) do(ctx context.Context, name, uid string, freezeFor time.Duration) error {
	switch name {
	case "pause":
		return s.deps.Domains.Pause(ctx, uid)
	case "unpause":
		return s.deps.Domains.Unpause(ctx, uid)
	case "softreboot":
		return s.deps.Domains.SoftReboot(ctx, uid)
	case "reset":
		c, err := s.deps.Domains.QMP(ctx, uid)
		if err != nil {
			return err
		}
		return c.SystemReset(ctx)
	case "freeze":
		return s.deps.Domains.Freeze(ctx, uid, freezeFor)
	case "unfreeze":
		return s.deps.Domains.Unfreeze(ctx, uid)
	}
	return fmt.Errorf("unknown action %q", name)
}
