package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/nodevirt/nodevirt/node/agent"
)

func TestLoadConfig(t *testing.T) {
	yes := true
	tests := []struct {
		name    string
		file    string // "" = no file
		flags   fileConfig
		want    func(*agent.Config)
		wantErr bool
	}{{
		name: "Defaults",
		want: func(*agent.Config) {},
	}, {
		name: "File",
		file: "allowEmulation: true\nkubeletRoot: /k\nworkers: 2\nresync: 10s\ncallTimeout: 3s\n",
		want: func(c *agent.Config) {
			c.AllowEmulation, c.KubeletRoot, c.Workers = true, "/k", 2
			c.Resync, c.CallTimeout = 10*time.Second, 3*time.Second
		},
	}, {
		name:  "FlagsOverrideFile",
		file:  "kubeletRoot: /k\n",
		flags: fileConfig{KubeletRoot: "/flag", AllowEmulation: &yes},
		want:  func(c *agent.Config) { c.KubeletRoot, c.AllowEmulation = "/flag", true },
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
			got, _, err := loadConfig(path, tt.flags)
			if (err != nil) != tt.wantErr {
				t.Fatalf("loadConfig error = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			want := agent.DefaultConfig()
			tt.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfig_Services(t *testing.T) {
	no := false
	path := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(path, []byte("heartbeatInterval: 5s\ndevicePluginDir: /dp\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, got, err := loadConfig(path, fileConfig{DevicePlugins: &no})
	if err != nil {
		t.Fatal(err)
	}
	want := services{Heartbeat: true, HeartbeatInterval: 5 * time.Second, DevicePlugins: false, DevicePluginDir: "/dp"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
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
	cfg, svc, err := loadConfig(path, fileConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !svc.Heartbeat {
		t.Errorf("deployed config disables the heartbeat: %+v", svc)
	}
	// The DaemonSet's device-plugins container serves them
	// (cmd/nodevirt-deviceplugins): two servers of one resource would
	// take it from each other.
	if svc.DevicePlugins {
		t.Errorf("deployed config has the agent serve the device plugins: %+v", svc)
	}
	cfg.NodeName = "n"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.AllowEmulation {
		t.Errorf("deployed config does not allow emulation")
	}
}

func TestRunAll(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	err := runAll(ctx, map[string]func(context.Context) error{
		"fails": func(context.Context) error { return errors.New("boom") },
		"waits": func(ctx context.Context) error { <-ctx.Done(); close(stopped); return nil },
	})
	if err == nil || !strings.Contains(err.Error(), "fails: boom") {
		t.Errorf("runAll = %v, want the failing service's error", err)
	}
	select {
	case <-stopped:
	default:
		t.Error("the other service was not stopped")
	}
}
