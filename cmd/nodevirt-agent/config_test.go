package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

func TestLoadConfig(t *testing.T) {
	yes := true
	tests := []struct {
		name    string
		file    string // "" = no file
		flags   fileConfig
		want    func(*config)
		wantErr bool
	}{{
		name: "Defaults",
		want: func(*config) {},
	}, {
		name: "File",
		file: "allowEmulation: true\nkubeletRoot: /k\nworkers: 2\nresync: 10s\ncallTimeout: 3s\n" +
			"devicePluginDir: /dp\nheartbeatInterval: 5s\n",
		want: func(c *config) {
			c.AllowEmulation, c.KubeletRoot, c.Workers = true, "/k", 2
			c.Resync, c.CallTimeout = 10*time.Second, 3*time.Second
			c.DevicePluginDir, c.HeartbeatInterval = "/dp", 5*time.Second
		},
	}, {
		name:  "FlagsOverrideFile",
		file:  "kubeletRoot: /k\n",
		flags: fileConfig{KubeletRoot: "/flag", AllowEmulation: &yes},
		want:  func(c *config) { c.KubeletRoot, c.AllowEmulation = "/flag", true },
	}, {
		name:    "UnknownKey",
		file:    "allowEmulaton: true\n",
		wantErr: true,
	}, {
		name:    "BadDuration",
		file:    "resync: soon\n",
		wantErr: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = filepath.Join(t.TempDir(), "agent.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := loadConfig(path, tt.flags)
			if (err != nil) != tt.wantErr {
				t.Fatalf("loadConfig error = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			want := defaultConfig()
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// The ConfigMap shipped in deploy/agent must parse.
func TestLoadConfig_DeployedConfigMap(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "agent", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["agent.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, fileConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeName = "n"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.AllowEmulation {
		t.Errorf("deployed config does not allow emulation")
	}
}
