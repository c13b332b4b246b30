package api

import (
	"context"
	"fmt"
	"net/http"
)

// action handles PUT .../{pause|unpause|softreboot|reset|freeze|unfreeze}.
func (s *Server) action(name string) uidHandler {
	return func(w http.ResponseWriter, r *http.Request, uid string) {
		timeout := s.cfg.CallTimeout
		if name == "softreboot" {
			timeout = s.cfg.SoftRebootTimeout
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := s.do(ctx, name, uid); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}

// do runs one lifecycle action on the VMI uid.
func (s *Server) do(ctx context.Context, name, uid string) error {
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
	case "freeze", "unfreeze":
		ga, err := s.deps.Domains.GuestAgent(ctx, uid)
		if err != nil {
			return err
		}
		if name == "freeze" {
			_, err = ga.FSFreezeFreeze(ctx)
		} else {
			_, err = ga.FSFreezeThaw(ctx)
		}
		if err != nil {
			return fmt.Errorf("VMI %s: %s: %w", uid, name, err)
		}
		return nil
	}
	return fmt.Errorf("unknown action %q", name)
}
