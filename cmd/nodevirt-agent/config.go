package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodevirt/nodevirt/node/agent"
)

// config is everything the agent process runs: the agent itself and, next
// to it, the node heartbeat and the kubelet device plugins.
type config struct {
	agent.Config
	// DevicePluginDir is the kubelet's device-plugin directory (where
	// kubelet.sock lives) as the agent sees it.
	DevicePluginDir string
	// HeartbeatInterval is the period of the node heartbeat.
	HeartbeatInterval time.Duration
}

// defaultConfig returns the defaults for everything but NodeName.
func defaultConfig() config {
	return config{
		Config:            agent.DefaultConfig(),
		DevicePluginDir:   "/var/lib/kubelet/device-plugins",
		HeartbeatInterval: 30 * time.Second,
	}
}

// Validate reports every problem of c at once.
func (c config) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		errs = append(errs, err)
	}
	if !filepath.IsAbs(c.DevicePluginDir) {
		errs = append(errs, fmt.Errorf("device plugin dir %q: must be absolute", c.DevicePluginDir))
	}
	if c.HeartbeatInterval < time.Second {
		errs = append(errs, fmt.Errorf("heartbeat interval %v, want >= 1s", c.HeartbeatInterval))
	}
	return errors.Join(errs...)
}

// fileConfig is the agent's ConfigMap file (agent.yaml). Unset fields keep
// defaultConfig's values.
type fileConfig struct {
	KubeletRoot       string `json:"kubeletRoot,omitempty"`
	AllowEmulation    *bool  `json:"allowEmulation,omitempty"`
	Workers           int    `json:"workers,omitempty"`
	Resync            string `json:"resync,omitempty"`      // e.g. "30s"
	CallTimeout       string `json:"callTimeout,omitempty"` // e.g. "10s"
	DevicePluginDir   string `json:"devicePluginDir,omitempty"`
	HeartbeatInterval string `json:"heartbeatInterval,omitempty"` // e.g. "30s"
}

// loadConfig reads path (if not empty), then applies the flag overrides.
func loadConfig(path string, flags fileConfig) (config, error) {
	cfg := defaultConfig()
	var fc fileConfig
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		if err := yaml.UnmarshalStrict(b, &fc); err != nil {
			return cfg, fmt.Errorf("config %s: %w", path, err)
		}
	}
	for _, c := range []fileConfig{fc, flags} {
		if err := c.applyTo(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func (c fileConfig) applyTo(cfg *config) error {
	if c.KubeletRoot != "" {
		cfg.KubeletRoot = c.KubeletRoot
	}
	if c.AllowEmulation != nil {
		cfg.AllowEmulation = *c.AllowEmulation
	}
	if c.Workers != 0 {
		cfg.Workers = c.Workers
	}
	if c.DevicePluginDir != "" {
		cfg.DevicePluginDir = c.DevicePluginDir
	}
	for _, d := range []struct {
		s   string
		dst *time.Duration
	}{{c.Resync, &cfg.Resync}, {c.CallTimeout, &cfg.CallTimeout}, {c.HeartbeatInterval, &cfg.HeartbeatInterval}} {
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
