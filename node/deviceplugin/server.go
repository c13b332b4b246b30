package deviceplugin

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// server implements the kubelet's DevicePlugin service for one Device. It
// holds no mutable state: every device ID maps to the same device node.
type server struct {
	pluginapi.UnimplementedDevicePluginServer

	dev   Device
	ids   map[string]bool
	order []string // ids in advertising order
	cfg   Config
	// done ends the ListAndWatch streams when the plugin stops serving.
	done <-chan struct{}
}

func newServer(dev Device, cfg Config, done <-chan struct{}) *server {
	s := &server{dev: dev, ids: make(map[string]bool, cfg.Count), cfg: cfg, done: done}
	for i := range cfg.Count {
		id := fmt.Sprintf("%s%d", dev.shortName(), i)
		s.ids[id] = true
		s.order = append(s.order, id)
	}
	return s
}

// GetDevicePluginOptions: no PreStartContainer, no preferred allocation.
func (s *server) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the device list, then again whenever the device
// node's health changes, until the kubelet hangs up or the plugin stops.
func (s *server) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	healthy := exists(s.cfg.Host, s.dev.Path)
	if err := stream.Send(s.list(healthy)); err != nil {
		return fmt.Errorf("%s: send device list: %w", s.dev.Resource, err)
	}
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-s.done:
			return nil
		case <-tick.C:
		}
		now := exists(s.cfg.Host, s.dev.Path)
		if now == healthy {
			continue
		}
		healthy = now
		s.cfg.Logger.Info("device health changed", "resource", s.dev.Resource, "path", s.dev.Path, "healthy", healthy)
		if err := stream.Send(s.list(healthy)); err != nil {
			return fmt.Errorf("%s: send device list: %w", s.dev.Resource, err)
		}
	}
}

// list is the ListAndWatch message for the current health.
func (s *server) list(healthy bool) *pluginapi.ListAndWatchResponse {
	health := pluginapi.Healthy
	if !healthy {
		health = pluginapi.Unhealthy
	}
	resp := &pluginapi.ListAndWatchResponse{Devices: make([]*pluginapi.Device, 0, len(s.order))}
	for _, id := range s.order {
		resp.Devices = append(resp.Devices, &pluginapi.Device{ID: id, Health: health})
	}
	return resp
}

// Allocate gives every requesting container the device node, read-write
// with mknod allowed ("rwm").
func (s *server) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, creq := range req.GetContainerRequests() {
		for _, id := range creq.GetDevicesIds() {
			if !s.ids[id] {
				return nil, status.Errorf(codes.InvalidArgument, "%s: unknown device %q", s.dev.Resource, id)
			}
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Devices: []*pluginapi.DeviceSpec{{
				ContainerPath: s.dev.Path,
				HostPath:      s.dev.Path,
				Permissions:   "rwm",
			}},
		})
	}
	return resp, nil
}

// GetPreferredAllocation is not advertised; answer with no preference.
func (s *server) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

// PreStartContainer is not advertised; nothing to do.
func (s *server) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
