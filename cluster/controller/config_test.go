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
		"cpu ratio 0":         func(c *Config) { c.CPUAllocationRatio = 0 },
		"unknown emulation":   func(c *Config) { c.Emulation = "sometimes" },
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

func TestConfig_WithObjects(t *testing.T) {
	base := DefaultConfig()
	base.Identity = "x"
	cm := &corev1.ConfigMap{Data: map[string]string{KeyLauncherImage: "reg/launcher:2", KeyUseEmulation: "true", KeyEvictionStrategy: "None",
		KeyMigrations: "parallelMigrationsPerCluster: 3"}}
	kv := func(c v1.KubeVirtConfiguration) *v1.KubeVirt {
		return &v1.KubeVirt{Spec: v1.KubeVirtSpec{Configuration: c}}
	}
	live := v1.EvictionStrategyLiveMigrate
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		kv   *v1.KubeVirt
		want func(*Config)
	}{
		{"neither: the flags", nil, nil, func(*Config) {}},
		{"ConfigMap only", cm, nil, func(c *Config) {
			c.LauncherImage, c.Emulation, c.EvictionStrategy = "reg/launcher:2", vmi.EmulationAlways, v1.EvictionStrategyNone
			c.Migrations = v1.MigrationConfiguration{ParallelMigrationsPerCluster: ptr.To[uint32](3)}
		}},
		{"an empty KubeVirt keeps the ConfigMap's", cm, kv(v1.KubeVirtConfiguration{}), func(c *Config) {
			c.LauncherImage, c.Emulation, c.EvictionStrategy = "reg/launcher:2", vmi.EmulationAlways, v1.EvictionStrategyNone
			c.Migrations = v1.MigrationConfiguration{ParallelMigrationsPerCluster: ptr.To[uint32](3)}
		}},
		{"the KubeVirt's fields win", cm, kv(v1.KubeVirtConfiguration{
			DeveloperConfiguration: &v1.DeveloperConfiguration{UseEmulation: ptr.To(false), CPUAllocationRatio: 4, FeatureGates: []string{"Snapshot"}},
			MigrationConfiguration: &v1.MigrationConfiguration{AllowPostCopy: ptr.To(true)},
			EvictionStrategy:       &live,
			ImagePullPolicy:        corev1.PullAlways,
		}), func(c *Config) {
			c.LauncherImage, c.Emulation, c.CPUAllocationRatio, c.FeatureGates = "reg/launcher:2", vmi.EmulationNever, 4, []string{"Snapshot"}
			c.Migrations = v1.MigrationConfiguration{AllowPostCopy: ptr.To(true)}
			c.EvictionStrategy, c.LauncherPullPolicy = live, corev1.PullAlways
		}},
		{"useEmulation true", nil, kv(v1.KubeVirtConfiguration{DeveloperConfiguration: &v1.DeveloperConfiguration{UseEmulation: ptr.To(true)}}),
			func(c *Config) { c.Emulation = vmi.EmulationAlways }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := base.withObjects(tc.cm, tc.kv)
			if err != nil {
				t.Fatal(err)
			}
			want := base
			tc.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := base.withObjects(&corev1.ConfigMap{Data: map[string]string{KeyUseEmulation: "maybe"}}, nil); err == nil {
		t.Error("a ConfigMap value that does not parse: no error")
	}
}

// The shipped KubeVirt example must be one the controller takes as is.
func TestConfig_ExampleKubeVirt(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "examples", "kubevirt.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kv v1.KubeVirt
	if err := yaml.UnmarshalStrict(data, &kv); err != nil {
		t.Fatal(err)
	}
	base := DefaultConfig()
	base.Identity = "x"
	got, err := base.withObjects(nil, &kv)
	if err != nil {
		t.Fatalf("deploy/examples/kubevirt.yaml: %v", err)
	}
	if got.CPUAllocationRatio != 10 || got.Emulation != vmi.EmulationAuto || got.LauncherPullPolicy != corev1.PullIfNotPresent {
		t.Errorf("config from the example: %+v", got)
	}
}
