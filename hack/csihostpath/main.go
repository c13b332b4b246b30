package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// version is the driver's vendor version.
const version = "0.1.0"

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(os.Args[1:], log); err != nil {
		log.Error("csihostpath", "error", err)
		os.Exit(1)
	}
}

type config struct {
	name, endpoint, root, nodeID string
	// registrationDir is the kubelet's plugins_registry directory;
	// kubeletEndpoint the driver socket's path as the kubelet sees it.
	registrationDir, kubeletEndpoint string
	controller, node                 bool
	// parentMountNS: make mounts in the parent's mount namespace (the
	// runtime shim's: the node's), see mountns.go.
	parentMountNS bool
}

func parse(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("csihostpath", flag.ContinueOnError)
	fs.StringVar(&c.name, "driver-name", "hostpath.csi.nodevirt.local", "the CSI driver's name (the StorageClass provisioner)")
	fs.StringVar(&c.endpoint, "endpoint", "unix:///csi/csi.sock", "the CSI socket")
	fs.StringVar(&c.root, "root", "/var/lib/csi-hostpath", "where volumes and snapshots live (one directory every node shares)")
	fs.StringVar(&c.nodeID, "node-id", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	fs.StringVar(&c.registrationDir, "registration-dir", "", "the kubelet's plugins_registry directory; empty: do not register")
	fs.StringVar(&c.kubeletEndpoint, "kubelet-registration-path", "", "the CSI socket's path as the kubelet sees it")
	fs.BoolVar(&c.controller, "controller", true, "serve the Controller service")
	fs.BoolVar(&c.node, "node", true, "serve the Node service")
	fs.BoolVar(&c.parentMountNS, "parent-mount-namespace", false, "publish in the parent process's mount namespace (in a pod: the node's; needs hostPID)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case !strings.HasPrefix(c.endpoint, "unix://"):
		return c, fmt.Errorf("-endpoint %q: want unix://PATH", c.endpoint)
	case c.node && c.nodeID == "":
		return c, errors.New("-node-id: empty (and $NODE_NAME unset)")
	case c.registrationDir != "" && c.kubeletEndpoint == "":
		return c, errors.New("-registration-dir needs -kubelet-registration-path")
	}
	return c, nil
}

func run(args []string, log *slog.Logger) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	srv, err := serve(c, log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	srv.stop()
	return nil
}

// servers are the running gRPC servers.
type servers struct{ grpc []*grpc.Server }

func (s servers) stop() {
	for _, g := range s.grpc {
		g.GracefulStop()
	}
}

// serve starts the CSI server on c.endpoint and, when asked, the kubelet
// registration server.
func serve(c config, log *slog.Logger) (servers, error) {
	var out servers
	st := store{root: c.root}
	g := grpc.NewServer()
	csi.RegisterIdentityServer(g, &identity{name: c.name, version: version})
	if c.controller {
		csi.RegisterControllerServer(g, &controller{st: st, log: log})
	}
	if c.node {
		n := &node{id: c.nodeID, st: st, log: log}
		if c.parentMountNS {
			ns, err := openParentMountNS()
			if err != nil {
				return out, err
			}
			n.ns = ns
		}
		csi.RegisterNodeServer(g, n)
	}
	l, err := listen(strings.TrimPrefix(c.endpoint, "unix://"))
	if err != nil {
		return out, err
	}
	go func() { _ = g.Serve(l) }()
	out.grpc = append(out.grpc, g)
	log.Info("serving CSI", "driver", c.name, "endpoint", c.endpoint, "controller", c.controller, "node", c.node, "root", c.root)
	if c.registrationDir == "" {
		return out, nil
	}
	r := grpc.NewServer()
	registerapi.RegisterRegistrationServer(r, &registration{name: c.name, endpoint: c.kubeletEndpoint, log: log})
	rl, err := listen(filepath.Join(c.registrationDir, registrationSocket))
	if err != nil {
		out.stop()
		return servers{}, err
	}
	go func() { _ = r.Serve(rl) }()
	out.grpc = append(out.grpc, r)
	return out, nil
}

// registrationSocket is the registration socket's name in the kubelet's
// plugins_registry directory. The kubelet takes any socket there, so the
// name is short: the directory of a local cluster's node is already deep,
// and a unix socket's address holds at most maxSocketPath bytes.
const registrationSocket = "csihostpath.sock"

// maxSocketPath is the longest path a unix socket address holds: sun_path
// is 108 bytes, NUL included.
const maxSocketPath = 107

// listen listens on a unix socket at path, replacing a stale one.
func listen(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("unix socket %s: %d bytes, over the %d a socket address holds (use a shorter cluster directory)", path, len(path), maxSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}
