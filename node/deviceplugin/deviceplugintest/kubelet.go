package deviceplugintest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Kubelet is a fake kubelet registration endpoint.
type Kubelet struct {
	// Dir is the device-plugin directory holding kubelet.sock.
	Dir string

	regs chan *pluginapi.RegisterRequest
	mu   sync.Mutex
	srv  *grpc.Server
}

// Start serves kubelet.sock in dir until the test ends.
func Start(t testing.TB, dir string) *Kubelet {
	t.Helper()
	k := &Kubelet{Dir: dir, regs: make(chan *pluginapi.RegisterRequest, 64)}
	if err := k.listen(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k
}

func (k *Kubelet) listen() error {
	lis, err := net.Listen("unix", filepath.Join(k.Dir, "kubelet.sock"))
	if err != nil {
		return fmt.Errorf("fake kubelet: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registration{regs: k.regs})
	k.mu.Lock()
	k.srv = srv
	k.mu.Unlock()
	go srv.Serve(lis) //nolint:errcheck // ends with Stop
	return nil
}

// Stop stops serving, after answering registrations in flight, and removes
// kubelet.sock.
func (k *Kubelet) Stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.srv != nil {
		k.srv.GracefulStop()
		k.srv = nil
	}
}

// Restart does what a restarting kubelet does to the directory: stop,
// remove every file in it, serve a new kubelet.sock.
func (k *Kubelet) Restart(t testing.TB) {
	t.Helper()
	k.Stop()
	entries, err := os.ReadDir(k.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(k.Dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.listen(); err != nil {
		t.Fatal(err)
	}
}

// Registration waits for the next registration request.
func (k *Kubelet) Registration(ctx context.Context) (*pluginapi.RegisterRequest, error) {
	select {
	case r := <-k.regs:
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fake kubelet: no registration: %w", ctx.Err())
	}
}

// Dial connects to a plugin's endpoint (a socket name in Dir), as the
// kubelet does after a registration. The connection closes when the test
// ends.
func (k *Kubelet) Dial(t testing.TB, endpoint string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+filepath.Join(k.Dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

type registration struct {
	pluginapi.UnimplementedRegistrationServer
	regs chan<- *pluginapi.RegisterRequest
}

func (r registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	select {
	case r.regs <- req:
	default: // a test that does not read them does not care
	}
	return &pluginapi.Empty{}, nil
}
