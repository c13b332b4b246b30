package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Command is one QMP or guest agent command of the passthrough routes.
type Command struct {
	Execute   string          `json:"execute"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Debug route names, under DebugPrefix; every route but domains takes the
// VMI (ns/name or UID) in the query parameter "vmi".
const (
	RouteDomains  = "domains"
	RouteDomain   = "domain"
	RouteTimeline = "timeline"
	RoutePause    = "pause"
	RouteUnpause  = "unpause"
	RouteQMP      = "qmp"
	RouteAgent    = "agent"
	RouteConsole  = "console"
)

func (s *Server) debugRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+DebugPrefix+RouteDomains, s.listDomains)
	mux.HandleFunc("GET "+DebugPrefix+RouteDomain, s.byRef(false, s.showDomain))
	mux.HandleFunc("GET "+DebugPrefix+RouteTimeline, s.byRef(false, s.timeline))
	mux.HandleFunc("PUT "+DebugPrefix+RoutePause, s.byRef(true, s.action("pause")))
	mux.HandleFunc("PUT "+DebugPrefix+RouteUnpause, s.byRef(true, s.action("unpause")))
	mux.HandleFunc("POST "+DebugPrefix+RouteQMP, s.byRef(true, s.qmpPassthrough))
	mux.HandleFunc("POST "+DebugPrefix+RouteAgent, s.byRef(true, s.agentPassthrough))
	mux.HandleFunc("GET "+DebugPrefix+RouteConsole, s.byRef(true, s.console))
}

// byRef resolves the query parameter vmi; live requires a live record.
func (s *Server) byRef(live bool, h uidHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.serveResolved(w, r, r.URL.Query().Get("vmi"), live, h)
	}
}

func (s *Server) listDomains(w http.ResponseWriter, r *http.Request) {
	recs, err := s.deps.Records.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, recs)
}

func (s *Server) showDomain(w http.ResponseWriter, r *http.Request, uid string) {
	rec, err := s.deps.Records.Get(r.Context(), uid)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request, uid string) {
	evs, err := s.deps.Records.Timeline(r.Context(), uid)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, evs)
}

// executor is what the passthrough routes need of a QMP or guest agent
// connection.
type executor interface {
	Execute(ctx context.Context, command string, args, result any) error
}

func (s *Server) qmpPassthrough(w http.ResponseWriter, r *http.Request, uid string) {
	s.passthrough(w, r, func(ctx context.Context) (executor, error) { return s.deps.Domains.QMP(ctx, uid) })
}

func (s *Server) agentPassthrough(w http.ResponseWriter, r *http.Request, uid string) {
	s.passthrough(w, r, func(ctx context.Context) (executor, error) { return s.deps.Domains.GuestAgent(ctx, uid) })
}

// passthrough runs the command in the body and answers {"return": ...}.
func (s *Server) passthrough(w http.ResponseWriter, r *http.Request, conn func(context.Context) (executor, error)) {
	var cmd Command
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&cmd); err != nil || cmd.Execute == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("body must be {\"execute\": ..., \"arguments\": ...}: %v", err)})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
	defer cancel()
	c, err := conn(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var args any
	if len(cmd.Arguments) > 0 {
		args = cmd.Arguments
	}
	var res json.RawMessage
	if err := c.Execute(ctx, cmd.Execute, args, &res); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(res) == 0 {
		res = json.RawMessage("{}")
	}
	writeJSON(w, http.StatusOK, map[string]json.RawMessage{"return": res})
}
