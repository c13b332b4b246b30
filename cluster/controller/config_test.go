package controller

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

func TestConfig_WithData(t *testing.T) {
	base := DefaultConfig()
	base.Identity = "x"
	tests := []struct {
		name    string
		data    map[string]string
		want    func(*Config)
		wantErr bool
	}{
		{"empty keeps flags", nil, func(*Config) {}, false},
		{"all keys", map[string]string{KeyLauncherImage: "reg/launcher:v2", KeyUseEmulation: "true", KeyHeartbeatThreshold: "30s"},
			func(c *Config) {
				c.LauncherImage, c.Emulation, c.HeartbeatThreshold = "reg/launcher:v2", vmi.EmulationAlways, 30*time.Second
			}, false},
		{"emulation off", map[string]string{KeyUseEmulation: "false"}, func(c *Config) { c.Emulation = vmi.EmulationNever }, false},
		{"emulation auto, any case", map[string]string{KeyUseEmulation: "Auto"}, func(c *Config) { c.Emulation = vmi.EmulationAuto }, false},
		{"empty image ignored", map[string]string{KeyLauncherImage: ""}, func(*Config) {}, false},
		{"bad emulation mode", map[string]string{KeyUseEmulation: "yes please"}, nil, true},
		{"bad duration", map[string]string{KeyHeartbeatThreshold: "5"}, nil, true},
		{"migrations and eviction strategy", map[string]string{
			KeyMigrations:       "parallelMigrationsPerCluster: 1\nbandwidthPerMigration: 64Mi\nallowPostCopy: true\n",
			KeyEvictionStrategy: "LiveMigrate"},
			func(c *Config) {
				bw := resource.MustParse("64Mi")
				c.Migrations = v1.MigrationConfiguration{ParallelMigrationsPerCluster: ptr.To[uint32](1),
					BandwidthPerMigration: &bw, AllowPostCopy: ptr.To(true)}
				c.EvictionStrategy = v1.EvictionStrategyLiveMigrate
			}, false},
		{"unknown migrations field", map[string]string{KeyMigrations: "parallelMigrations: 1"}, nil, true},
		{"unknown eviction strategy", map[string]string{KeyEvictionStrategy: "Evict"}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := base.withData(tc.data)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			want := base
			tc.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	ok := DefaultConfig()
	ok.Identity = "x"
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mod := range map[string]func(*Config){
		"no identity":         func(c *Config) { c.Identity = "" },
		"renew ≥ lease":       func(c *Config) { c.RenewDeadline = c.LeaseDuration },
		"no workers":          func(c *Config) { c.Workers = 0 },
		"no launcher image":   func(c *Config) { c.LauncherImage = "" },
		"zero heartbeat":      func(c *Config) { c.HeartbeatThreshold = 0 },
		"retry ≥ renew":       func(c *Config) { c.RetryPeriod = c.RenewDeadline },
		"no lease name":       func(c *Config) { c.LeaseName = "" },
		"zero heartbeat poll": func(c *Config) { c.HeartbeatRecheck = 0 },
		"cert lifetime < 10m": func(c *Config) { c.CertLifetime = 5 * time.Minute },
	} {
		c := ok
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s: Validate() = nil, want an error", name)
		}
	}
}

// The shipped ConfigMap must parse.
func TestConfig_DeployedConfigMap(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "controller", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatal(err)
	}
	base := DefaultConfig()
	got, err := base.withData(cm.Data)
	if err != nil {
		t.Fatalf("deploy/controller/configmap.yaml: %v", err)
	}
	if ptr.Deref(got.Migrations.ParallelMigrationsPerCluster, 0) != v1.DefaultParallelMigrationsPerCluster || got.EvictionStrategy != v1.EvictionStrategyNone {
		t.Errorf("migrations = %+v, evictionStrategy = %q", got.Migrations, got.EvictionStrategy)
	}
}
