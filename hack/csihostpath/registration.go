package main

import (
	"context"
	"log/slog"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registration answers the kubelet's plugin watcher, which finds the
// socket in its plugins_registry directory and asks what it is: a CSI
// plugin of this name at endpoint (the driver socket's path as the kubelet
// sees it). This is the node-driver-registrar sidecar's job, done in the
// driver.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	log            *slog.Logger
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint,
		SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		r.log.Info("registered with the kubelet", "driver", r.name, "endpoint", r.endpoint)
	} else {
		r.log.Error("the kubelet refused the registration", "driver", r.name, "error", s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
