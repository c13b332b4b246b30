package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nodevirt/nodevirt/node/launchspec"
	"github.com/nodevirt/nodevirt/node/unixsock"
)

// Defaults of Config.
const (
	DefaultQEMU       = "/usr/bin/qemu-system-x86_64"
	DefaultSWTPM      = "/usr/bin/swtpm"
	DefaultLinger     = 5 * time.Second
	DefaultHolderWait = 2 * time.Minute
	DefaultKillWait   = 5 * time.Second
	maxSpecBytes      = 4 << 20
)

// Config configures a Server.
type Config struct {
	SocketsDir string // the pod's sockets emptyDir (required)
	PrivateDir string // the pod's private emptyDir (required)
	// PVCDir holds the filesystem-mode PVC mounts (<PVCDir>/<volume>);
	// "" = launchspec.DefaultPVCDir.
	PVCDir string
	// BlockDir holds the block-mode PVC devices (<BlockDir>/<volume>);
	// "" = launchspec.DefaultBlockDir.
	BlockDir string
	QEMU     string // QEMU binary; "" = DefaultQEMU
	SWTPM    string // swtpm binary (devices.tpm); "" = DefaultSWTPM
	// Linger is how long the API keeps answering after QEMU exited.
	Linger time.Duration
	// HolderWait bounds the wait for a containerDisk holder's pid file.
	HolderWait time.Duration
	// KillWait is the time between QMP quit and SIGKILL.
	KillWait time.Duration
	// QEMUOutput receives QEMU's stdout and stderr (nil = discarded).
	QEMUOutput io.Writer
	Logger     *slog.Logger // nil = silent
}

// Validate fills in defaults and checks cfg.
func (c *Config) Validate() error {
	if c.SocketsDir == "" || c.PrivateDir == "" {
		return errors.New("launcher config: sockets and private directories are required")
	}
	if c.QEMU == "" {
		c.QEMU = DefaultQEMU
	}
	if c.PVCDir == "" {
		c.PVCDir = launchspec.DefaultPVCDir
	}
	if c.BlockDir == "" {
		c.BlockDir = launchspec.DefaultBlockDir
	}
	if c.SWTPM == "" {
		c.SWTPM = DefaultSWTPM
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.HolderWait == 0 {
		c.HolderWait = DefaultHolderWait
	}
	if c.KillWait == 0 {
		c.KillWait = DefaultKillWait
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Server is the launcher: the API on launcher.sock and the QEMU it starts.
type Server struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	status Status
	spec   *launchspec.Spec
	qemu   *qemuProc // set once QEMU started
	killed bool      // Run's context ended: kill QEMU as soon as it exists

	stopOnce sync.Once
	stop     chan struct{} // closed by Stop
	exited   chan struct{} // closed when status.State becomes exited
}

// NewServer returns a Server for cfg.
func NewServer(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		status: Status{State: StateWaiting},
		stop:   make(chan struct{}),
		exited: make(chan struct{}),
	}, nil
}

// Status returns a snapshot of the launcher's status.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Stop asks the launcher to end (SIGTERM): without QEMU it ends at once;
// with QEMU it powers the guest down with the spec's grace period (see the
// package doc). It does not wait; Run returns when everything ended.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.status.State == StateWaiting {
			s.setExitedLocked(nil, "")
		}
	})
}

// Run listens on <SocketsDir>/launcher.sock and serves until QEMU has
// exited and Linger passed, Stop ended a launcher that never started
// QEMU, or ctx ended (which kills QEMU). It returns QEMU's exit, nil if
// QEMU never ran.
func (s *Server) Run(ctx context.Context) (*Exit, error) {
	path := filepath.Join(s.cfg.SocketsDir, launchspec.LauncherSocket)
	ln, err := listenInPlace(path)
	if err != nil {
		return nil, err
	}
	defer os.Remove(path)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	mux.HandleFunc("PUT /v1/launch", s.handleLaunch)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	s.log.Info("launcher listening", "socket", path)

	select {
	case <-s.exited:
		select {
		case <-time.After(s.cfg.Linger):
		case <-ctx.Done():
		}
	case <-ctx.Done():
		s.killQEMU()
		<-s.exited
	case err := <-served:
		s.killQEMU()
		return nil, fmt.Errorf("launcher: serve %s: %w", path, err)
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = hs.Shutdown(shutCtx)
	return s.Status().Exit, nil
}

// listenInPlace listens on a unix socket that appears at path already
// accepting: it is bound and listening under a temporary name, then
// renamed into place. The agent dials the socket as soon as inotify tells
// it the name exists; a socket bound but not yet listening would refuse
// it, and no further event would come.
func listenInPlace(path string) (net.Listener, error) {
	tmp := path + ".tmp"
	for _, p := range []string{path, tmp} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("launcher: remove stale socket %s: %w", p, err)
		}
	}
	// unixsock.Listen binds however long the path, and leaves the file to
	// its caller when closed: its name changes below.
	ln, err := unixsock.Listen(tmp)
	if err != nil {
		return nil, fmt.Errorf("launcher: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("launcher: socket into place: %w", err)
	}
	return ln, nil
}

func (s *Server) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Status())
}

func (s *Server) handleLaunch(w http.ResponseWriter, r *http.Request) {
	var spec launchspec.Spec
	dec := json.NewDecoder(io.LimitReader(r.Body, maxSpecBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "decode launch spec: " + err.Error()})
		return
	}
	if err := spec.Verify(); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	if err := s.checkPaths(spec); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error()})
		return
	}
	s.mu.Lock()
	switch {
	case s.spec != nil && s.spec.Hash == spec.Hash:
		st := s.status
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, st)
		return
	case s.spec != nil:
		have := s.spec.Hash
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, errorBody{Error: fmt.Sprintf("launcher already runs spec %s", have)})
		return
	case s.status.State != StateWaiting:
		s.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "launcher is stopping"})
		return
	}
	s.spec = &spec
	s.status.State = StatePreparing
	s.status.SpecHash = spec.Hash
	st := s.status
	s.mu.Unlock()
	s.log.Info("launch spec received", "vmi", spec.VMI.Namespace+"/"+spec.VMI.Name, "uid", spec.VMI.UID, "hash", spec.Hash)
	go s.launch(spec)
	writeJSON(w, http.StatusOK, st)
}

// checkPaths refuses disk preparation outside the private directory, and
// a PVC's anywhere but its own mount or device.
func (s *Server) checkPaths(spec launchspec.Spec) error {
	priv := filepath.Clean(s.cfg.PrivateDir) + string(filepath.Separator)
	for _, d := range spec.Disks {
		switch d.Kind {
		case launchspec.PVCFile:
			if want := filepath.Join(s.cfg.PVCDir, d.Volume, launchspec.PVCImageName); d.Target != want {
				return fmt.Errorf("disk %q: target %s is not the volume's %s", d.Volume, d.Target, want)
			}
		case launchspec.PVCBlock:
			if want := filepath.Join(s.cfg.BlockDir, d.Volume); d.Target != want {
				return fmt.Errorf("disk %q: target %s is not the volume's device %s", d.Volume, d.Target, want)
			}
		default:
			if len(d.Target) <= len(priv) || d.Target[:len(priv)] != priv {
				return fmt.Errorf("disk %q: target %s is outside the private directory %s", d.Volume, d.Target, s.cfg.PrivateDir)
			}
		}
	}
	return nil
}

// setExitedLocked records the end; s.mu must be held.
func (s *Server) setExitedLocked(e *Exit, errMsg string) {
	if s.status.State == StateExited {
		return
	}
	s.status.State = StateExited
	s.status.Exit = e
	s.status.Error = errMsg
	close(s.exited)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
