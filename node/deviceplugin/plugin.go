package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// maxSocketPath is the longest unix socket path Linux accepts (sun_path
// holds 108 bytes including the terminating NUL).
const maxSocketPath = 107

// errReregister ends one serving round: the kubelet restarted (or someone
// removed our socket), so serve a fresh socket and register again.
var errReregister = errors.New("kubelet restarted")

// Plugin serves one Device to the kubelet. Create it with New, then call
// Run once.
type Plugin struct {
	dev     Device
	cfg     Config
	socket  string // our socket, in cfg.Dir
	kubelet string // kubelet.sock

	registrations atomic.Int64
}

// New returns a plugin for dev; cfg's zero fields take their defaults.
func New(dev Device, cfg Config) (*Plugin, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if dev.Resource == "" || !filepath.IsAbs(dev.Path) {
		return nil, fmt.Errorf("device plugin %+v: need a resource name and an absolute device path", dev)
	}
	cfg = cfg.withDefaults()
	p := &Plugin{
		dev:     dev,
		cfg:     cfg,
		socket:  filepath.Join(cfg.Dir, "nodevirt-"+dev.shortName()+".sock"),
		kubelet: filepath.Join(cfg.Dir, KubeletSocket),
	}
	if len(p.socket) > maxSocketPath {
		return nil, fmt.Errorf("device plugin %s: socket path %q longer than %d bytes", dev.Resource, p.socket, maxSocketPath)
	}
	return p, nil
}

// Socket is the path of the plugin's own socket.
func (p *Plugin) Socket() string { return p.socket }

// Registrations counts successful registrations with the kubelet so far
// (one more after every kubelet restart).
func (p *Plugin) Registrations() int64 { return p.registrations.Load() }

// Run serves and registers the plugin, re-registering after every kubelet
// restart, until ctx is cancelled; then it stops serving, removes its
// socket and returns nil. Failures (no kubelet yet, registration refused)
// are logged and retried every PollInterval.
func (p *Plugin) Run(ctx context.Context) error {
	log := p.cfg.Logger.With("resource", p.dev.Resource)
	for {
		err := p.serve(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errReregister) {
			log.Info("re-registering with the kubelet", "why", err)
			continue
		}
		log.Warn("device plugin not serving, retrying", "err", err, "in", p.cfg.PollInterval)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.cfg.PollInterval):
		}
	}
}

// serve runs one round: listen on a fresh socket, register with the current
// kubelet, and watch until ctx ends, the kubelet restarts or serving fails.
func (p *Plugin) serve(ctx context.Context) (err error) {
	kubelet, err := os.Stat(p.kubelet)
	if err != nil {
		return fmt.Errorf("device plugin %s: kubelet socket: %w", p.dev.Resource, err)
	}
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("device plugin %s: remove stale socket: %w", p.dev.Resource, err)
	}
	lis, err := net.Listen("unix", p.socket)
	if err != nil {
		return fmt.Errorf("device plugin %s: listen: %w", p.dev.Resource, err)
	}
	own, err := os.Stat(p.socket)
	if err != nil {
		lis.Close()
		return fmt.Errorf("device plugin %s: socket: %w", p.dev.Resource, err)
	}
	done := make(chan struct{})
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, newServer(p.dev, p.cfg, done))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		close(done)
		srv.Stop()
		// Stop closed the listener, which unlinks the socket; make sure.
		if sameFile(p.socket, own) {
			os.Remove(p.socket)
		}
	}()

	if err := p.register(ctx); err != nil {
		return err
	}
	p.registrations.Add(1)
	p.cfg.Logger.Info("registered with the kubelet", "resource", p.dev.Resource, "socket", p.socket, "devices", p.cfg.Count)
	return p.watch(ctx, served, own, kubelet)
}

// register announces the plugin to the kubelet through kubelet.sock.
func (p *Plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix:"+p.kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("device plugin %s: dial kubelet: %w", p.dev.Resource, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, p.cfg.RegisterTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(p.socket),
		ResourceName: p.dev.Resource,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		return fmt.Errorf("device plugin %s: register with %s: %w", p.dev.Resource, p.kubelet, err)
	}
	return nil
}

// watch polls for a kubelet restart: our socket deleted, or kubelet.sock
// replaced by a new file.
func (p *Plugin) watch(ctx context.Context, served <-chan error, own, kubelet os.FileInfo) error {
	tick := time.NewTicker(p.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-served:
			return fmt.Errorf("device plugin %s: serve: %w", p.dev.Resource, err)
		case <-tick.C:
		}
		if !sameFile(p.socket, own) {
			return fmt.Errorf("%w: socket %s removed", errReregister, p.socket)
		}
		if !sameFile(p.kubelet, kubelet) {
			return fmt.Errorf("%w: %s recreated", errReregister, p.kubelet)
		}
	}
}

// sameFile reports whether path still names the file fi describes. Inode
// numbers are reused at once on some file systems, so a recreated socket
// is told apart by its change time too.
func sameFile(path string, fi os.FileInfo) bool {
	cur, err := os.Stat(path)
	if err != nil || !os.SameFile(cur, fi) {
		return false
	}
	a, aok := cur.Sys().(*syscall.Stat_t)
	b, bok := fi.Sys().(*syscall.Stat_t)
	return !aok || !bok || a.Ctim == b.Ctim
}
