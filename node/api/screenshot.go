package api

import (
	"context"
	"net/http"
	"strconv"
)

// screenshot handles GET .../vnc/screenshot[?moveCursor=true]: the guest's
// screen as image/png. moveCursor is KubeVirt's: only "true" moves the
// pointer.
func (s *Server) screenshot(w http.ResponseWriter, r *http.Request, uid string) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
	defer cancel()
	img, err := s.deps.Domains.Screenshot(ctx, uid, r.URL.Query().Get("moveCursor") == "true")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	w.Header().Set("Content-Length", strconv.Itoa(len(img)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(img)
}
