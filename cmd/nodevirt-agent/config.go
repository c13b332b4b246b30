package main

import (
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/nodevirt/nodevirt/node/agent"
)

// fileConfig is the agent's ConfigMap file (agent.yaml). Unset fields keep
// their defaults (agent.DefaultConfig, defaultServices).
type fileConfig struct {
	KubeletRoot    string `json:"kubeletRoot,omitempty"`
	AllowEmulation *bool  `json:"allowEmulation,omitempty"`
	Workers        int    `json:"workers,omitempty"`
	Resync         string `json:"resync,omitempty"`      // e.g. "30s"
	CallTimeout    string `json:"callTimeout,omitempty"` // e.g. "10s"
	// SoftRebootTimeout: how long a soft reboot without a guest agent
	// waits for the guest to shut down (default 50s).
	SoftRebootTimeout string `json:"softRebootTimeout,omitempty"`

	Heartbeat         *bool  `json:"heartbeat,omitempty"`         // default true
	HeartbeatInterval string `json:"heartbeatInterval,omitempty"` // default 30s
	DevicePlugins     *bool  `json:"devicePlugins,omitempty"`     // default true
	DevicePluginDir   string `json:"devicePluginDir,omitempty"`   // default the kubelet's
	// StoreMinFree: below this much free space on the store's filesystem
	// the node takes no new VMIs (node/storeguard; default 32Mi).
	StoreMinFree string `json:"storeMinFree,omitempty"`
}

// services are what runs beside the reconcile loop.
type services struct {
	Heartbeat         bool
	HeartbeatInterval time.Duration
	DevicePlugins     bool
	DevicePluginDir   string
	StoreMinFree      uint64 // 0: storeguard's default
}

func defaultServices() services {
	return services{Heartbeat: true, DevicePlugins: true}
}

// loadConfig reads path (if not empty), then applies the flag overrides.
func loadConfig(path string, flags fileConfig) (agent.Config, services, error) {
	cfg, svc := agent.DefaultConfig(), defaultServices()
	var fc fileConfig
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, svc, fmt.Errorf("config: %w", err)
		}
		if err := yaml.UnmarshalStrict(b, &fc); err != nil {
			return cfg, svc, fmt.Errorf("config %s: %w", path, err)
		}
	}
	for _, c := range []fileConfig{fc, flags} {
		if err := c.applyTo(&cfg, &svc); err != nil {
			return cfg, svc, err
		}
	}
	return cfg, svc, nil
}

func (c fileConfig) applyTo(cfg *agent.Config, svc *services) error {
	if c.Heartbeat != nil {
		svc.Heartbeat = *c.Heartbeat
	}
	if c.DevicePlugins != nil {
		svc.DevicePlugins = *c.DevicePlugins
	}
	if c.DevicePluginDir != "" {
		svc.DevicePluginDir = c.DevicePluginDir
	}
	if c.KubeletRoot != "" {
		cfg.KubeletRoot = c.KubeletRoot
	}
	if c.StoreMinFree != "" {
		q, err := resource.ParseQuantity(c.StoreMinFree)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("config: storeMinFree %q: want a positive quantity such as 32Mi (%v)", c.StoreMinFree, err)
		}
		svc.StoreMinFree = uint64(q.Value())
	}
	if c.AllowEmulation != nil {
		cfg.AllowEmulation = *c.AllowEmulation
	}
	if c.Workers != 0 {
		cfg.Workers = c.Workers
	}
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{c.Resync, &cfg.Resync}, {c.CallTimeout, &cfg.CallTimeout},
		{c.SoftRebootTimeout, &cfg.SoftRebootTimeout}, {c.HeartbeatInterval, &svc.HeartbeatInterval}} {
		if d.s == "" {
			continue
		}
		v, err := time.ParseDuration(d.s)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		*d.dst = v
	}
	return nil
}
