package main

import (
	"fmt"
	"os"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/nodevirt/nodevirt/node/agent"
)

// fileConfig is the agent's ConfigMap file (agent.yaml). Unset fields keep
// agent.DefaultConfig's values.
type fileConfig struct {
	KubeletRoot    string `json:"kubeletRoot,omitempty"`
	AllowEmulation *bool  `json:"allowEmulation,omitempty"`
	Workers        int    `json:"workers,omitempty"`
	Resync         string `json:"resync,omitempty"`      // e.g. "30s"
	CallTimeout    string `json:"callTimeout,omitempty"` // e.g. "10s"
}

// loadConfig reads path (if not empty), then applies the flag overrides.
func loadConfig(path string, flags fileConfig) (agent.Config, error) {
	cfg := agent.DefaultConfig()
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

func (c fileConfig) applyTo(cfg *agent.Config) error {
	if c.KubeletRoot != "" {
		cfg.KubeletRoot = c.KubeletRoot
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
	}{{c.Resync, &cfg.Resync}, {c.CallTimeout, &cfg.CallTimeout}} {
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
