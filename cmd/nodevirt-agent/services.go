package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/nodevirt/nodevirt/node/deviceplugin"
	"github.com/nodevirt/nodevirt/node/heartbeat"
)

// service is one long-running part of the agent process.
type service struct {
	name string
	run  func(ctx context.Context) error
}

// nodeServices returns the heartbeat (node label kubevirt.io/schedulable and
// annotation kubevirt.io/heartbeat) and the kubelet device plugins (tun,
// vhost-net, and kvm where usable) that run next to the agent. Launcher pods
// select schedulable nodes and request devices.kubevirt.io/tun, so without
// both nothing schedules.
func nodeServices(cfg config, kube kubernetes.Interface, host fs.FS, log *slog.Logger) ([]service, error) {
	hb, err := heartbeat.New(heartbeat.Config{
		NodeName: cfg.NodeName,
		Interval: cfg.HeartbeatInterval,
		Logger:   log.With("component", "heartbeat"),
	}, kube.CoreV1().Nodes())
	if err != nil {
		return nil, err
	}
	kvm := deviceplugin.DetectKVM(host)
	devs := deviceplugin.HostDevices(host, kvm)
	log.Info("device plugins", "devices", len(devs), "kvmUsable", kvm.Usable, "kvmReason", kvm.Reason, "dir", cfg.DevicePluginDir)
	dpCfg := deviceplugin.Config{Dir: cfg.DevicePluginDir, Host: host, Logger: log.With("component", "deviceplugin")}
	if err := dpCfg.Validate(); err != nil {
		return nil, err
	}
	services := []service{{name: "heartbeat", run: hb.Run}}
	if len(devs) > 0 { // Run returns at once without devices, which would stop the process
		services = append(services, service{name: "device plugins", run: func(ctx context.Context) error {
			return deviceplugin.Run(ctx, dpCfg, devs)
		}})
	}
	return services, nil
}

// runAll runs every service until ctx ends or one of them returns; then it
// cancels the others, waits for them and returns the errors of all.
func runAll(ctx context.Context, services []service) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(services))
	for i, s := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			if err := s.run(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", s.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
