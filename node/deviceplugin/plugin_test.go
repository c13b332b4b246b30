package deviceplugin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodevirt/nodevirt/hack/testenv"
	"github.com/nodevirt/nodevirt/node/deviceplugin"
	"github.com/nodevirt/nodevirt/node/deviceplugin/deviceplugintest"
)

// fixture is a fake kubelet, a fake host root with /dev/net/tun and a tun
// plugin running against both.
type fixture struct {
	kubelet *deviceplugintest.Kubelet
	plugin  *deviceplugin.Plugin
	host    string // fake host root
	stopped chan error
	cancel  context.CancelFunc
}

func startFixture(t *testing.T, count int) *fixture {
	t.Helper()
	dir, host := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "dev", "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(host, "dev", "net", "tun"))
	f := &fixture{kubelet: deviceplugintest.Start(t, dir), host: host, stopped: make(chan error, 1)}
	p, err := deviceplugin.New(deviceplugin.Tun(), deviceplugin.Config{
		Dir: dir, Count: count, PollInterval: 20 * time.Millisecond, Host: os.DirFS(host), Logger: testenv.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.plugin = p
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { f.stopped <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-f.stopped
	})
	return f
}

func writeFile(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		t.Fatal(err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (f *fixture) registration(t *testing.T, ctx context.Context) *pluginapi.RegisterRequest {
	t.Helper()
	req, err := f.kubelet.Registration(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func devices(health string, ids ...string) *pluginapi.ListAndWatchResponse {
	resp := &pluginapi.ListAndWatchResponse{}
	for _, id := range ids {
		resp.Devices = append(resp.Devices, &pluginapi.Device{ID: id, Health: health})
	}
	return resp
}

func TestPlugin_RegistersListsAndAllocates(t *testing.T) {
	f := startFixture(t, 3)
	ctx := testContext(t)

	req := f.registration(t, ctx)
	want := &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     "nodevirt-tun.sock",
		ResourceName: deviceplugin.ResourceTun,
		Options:      &pluginapi.DevicePluginOptions{},
	}
	if diff := cmp.Diff(want, req, protocmp.Transform()); diff != "" {
		t.Errorf("registration mismatch (-want +got):\n%s", diff)
	}

	client := f.kubelet.Dial(t, req.Endpoint)
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&pluginapi.DevicePluginOptions{}, opts, protocmp.Transform()); diff != "" {
		t.Errorf("options mismatch (-want +got):\n%s", diff)
	}

	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(devices(pluginapi.Healthy, "tun0", "tun1", "tun2"), got, protocmp.Transform()); diff != "" {
		t.Errorf("ListAndWatch mismatch (-want +got):\n%s", diff)
	}

	resp, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"tun0"}}, {DevicesIds: []string{"tun1", "tun2"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	spec := &pluginapi.ContainerAllocateResponse{Devices: []*pluginapi.DeviceSpec{
		{ContainerPath: "/dev/net/tun", HostPath: "/dev/net/tun", Permissions: "rwm"},
	}}
	wantAlloc := &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{spec, spec}}
	if diff := cmp.Diff(wantAlloc, resp, protocmp.Transform()); diff != "" {
		t.Errorf("Allocate mismatch (-want +got):\n%s", diff)
	}

	_, err = client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"tun7"}},
	}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("Allocate(unknown device) error = %v, want InvalidArgument", err)
	}
}

func TestPlugin_ReportsDeviceHealth(t *testing.T) {
	f := startFixture(t, 2)
	ctx := testContext(t)
	req := f.registration(t, ctx)
	stream, err := f.kubelet.Dial(t, req.Endpoint).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	tun := filepath.Join(f.host, "dev", "net", "tun")
	steps := []struct {
		change func()
		want   string
	}{
		{func() {}, pluginapi.Healthy},
		{func() { os.Remove(tun) }, pluginapi.Unhealthy},
		{func() { writeFile(t, tun) }, pluginapi.Healthy},
	}
	for i, s := range steps {
		s.change()
		got, err := stream.Recv()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if diff := cmp.Diff(devices(s.want, "tun0", "tun1"), got, protocmp.Transform()); diff != "" {
			t.Errorf("step %d: ListAndWatch mismatch (-want +got):\n%s", i, diff)
		}
	}
}

func TestPlugin_ReregistersAfterKubeletRestart(t *testing.T) {
	f := startFixture(t, 1)
	ctx := testContext(t)
	f.registration(t, ctx)

	// A restarting kubelet deletes the plugin's socket and recreates its own.
	f.kubelet.Restart(t)
	req := f.registration(t, ctx)
	if _, err := f.kubelet.Dial(t, req.Endpoint).GetDevicePluginOptions(ctx, &pluginapi.Empty{}); err != nil {
		t.Fatalf("plugin not serving after re-registration: %v", err)
	}

	// A kubelet.sock replaced while the plugin's socket survives also means
	// a new kubelet.
	f.kubelet.Stop()
	f.kubelet = deviceplugintest.Start(t, f.kubelet.Dir)
	f.registration(t, ctx)
	// The plugin counts a registration once the kubelet has answered.
	for f.plugin.Registrations() != 3 {
		if ctx.Err() != nil {
			t.Fatalf("Registrations() = %d, want 3", f.plugin.Registrations())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPlugin_WaitsForKubelet(t *testing.T) {
	dir := t.TempDir()
	p, err := deviceplugin.New(deviceplugin.Tun(), deviceplugin.Config{Dir: dir, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	// Not a wait for a result: the plugin should have failed to register a
	// few times before the kubelet appears.
	time.Sleep(100 * time.Millisecond)
	k := deviceplugintest.Start(t, dir)
	if _, err := k.Registration(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

func TestPlugin_StopRemovesSocket(t *testing.T) {
	f := startFixture(t, 1)
	ctx := testContext(t)
	f.registration(t, ctx)
	if _, err := os.Stat(f.plugin.Socket()); err != nil {
		t.Fatalf("socket while running: %v", err)
	}
	f.cancel()
	select {
	case err := <-f.stopped:
		if err != nil {
			t.Errorf("Run() = %v, want nil", err)
		}
		f.stopped <- err // for the cleanup
	case <-ctx.Done():
		t.Fatal("Run did not return after cancel")
	}
	if _, err := os.Stat(f.plugin.Socket()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after stop: %v, want it removed", err)
	}
	if _, err := os.Stat(filepath.Join(f.kubelet.Dir, deviceplugin.KubeletSocket)); err != nil {
		t.Errorf("kubelet.sock after stop: %v, want it left alone", err)
	}
}

func TestNew_SocketPathTooLong(t *testing.T) {
	dir := "/tmp/" + strings.Repeat("d", 100)
	if _, err := deviceplugin.New(deviceplugin.Tun(), deviceplugin.Config{Dir: dir}); err == nil {
		t.Error("New() with a socket path over 107 bytes: want an error")
	}
}
