package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"

	"github.com/nodevirt/nodevirt/cluster/certsigner"
	"github.com/nodevirt/nodevirt/cluster/node"
	"github.com/nodevirt/nodevirt/cluster/vmi"
)

// Config is the controller process configuration.
type Config struct {
	// Namespace holds the Lease and the nodevirt-config ConfigMap.
	Namespace string
	// LeaseName names the leader election Lease.
	LeaseName string
	// Identity is this replica's name in the Lease (default: hostname_pid).
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// ListenAddr serves /healthz and /metrics ("" disables).
	ListenAddr string
	// Workers per controller.
	Workers int
	// ConfigMapName is read at start-up to override the fields below.
	ConfigMapName string
	// LauncherImage runs the launcher pods' compute container.
	LauncherImage string
	// Emulation is useEmulation: auto (the default: TCG only where no
	// KVM node fits the VMI), true (TCG everywhere) or false (KVM only).
	Emulation vmi.EmulationMode
	// PodShape chooses the launcher pods' shape (vmi.ShapeMode; "" is
	// Auto): one container with image volumes, or the fallback shape.
	PodShape vmi.ShapeMode
	// HeartbeatThreshold is the node heartbeat age after which a node is
	// unresponsive.
	HeartbeatThreshold time.Duration
	// HeartbeatRecheck is how often a stale node is looked at again.
	HeartbeatRecheck time.Duration
	// CADir holds the node API CA (the mounted Secret nodevirt-ca: ca.crt,
	// ca.key); the leader signs the node API CSRs with it and publishes
	// its bundle (cluster/certsigner). "" disables the signer.
	CADir string
	// CertLifetime is the validity of the certificates the signer issues
	// (a CSR's shorter spec.expirationSeconds wins).
	CertLifetime time.Duration
	// Migrations are the live migration limits and options (KubeVirt's
	// spec.configuration.migrations field names; unset fields take
	// KubeVirt's defaults).
	Migrations v1.MigrationConfiguration
	// EvictionStrategy is the default for VMIs that set none (KubeVirt's
	// spec.configuration.evictionStrategy; "" means None).
	EvictionStrategy v1.EvictionStrategy
}

// DefaultConfig returns the defaults the flags start from.
func DefaultConfig() Config {
	return Config{
		Namespace:          "nodevirt",
		LeaseName:          "nodevirt-controller",
		LeaseDuration:      15 * time.Second,
		RenewDeadline:      10 * time.Second,
		RetryPeriod:        2 * time.Second,
		ListenAddr:         ":8080",
		Workers:            4,
		ConfigMapName:      "nodevirt-config",
		LauncherImage:      "nodevirt/nodevirt-launcher",
		Emulation:          vmi.EmulationAuto,
		HeartbeatThreshold: node.DefaultThreshold,
		HeartbeatRecheck:   node.DefaultRecheck,
		CADir:              "/etc/nodevirt-ca",
		CertLifetime:       certsigner.DefaultLifetime,
	}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Namespace == "" || c.LeaseName == "":
		return errors.New("namespace and lease name must be set")
	case c.Identity == "":
		return errors.New("identity must be set")
	case c.RetryPeriod <= 0 || c.RenewDeadline <= c.RetryPeriod || c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("lease timings must satisfy 0 < retry (%s) < renew deadline (%s) < lease duration (%s)",
			c.RetryPeriod, c.RenewDeadline, c.LeaseDuration)
	case c.Workers < 1:
		return fmt.Errorf("workers must be at least 1, got %d", c.Workers)
	case c.LauncherImage == "":
		return errors.New("launcher image must be set")
	case c.HeartbeatThreshold <= 0 || c.HeartbeatRecheck <= 0:
		return errors.New("heartbeat threshold and recheck must be positive")
	case c.Emulation != vmi.EmulationAuto && c.Emulation != vmi.EmulationAlways && c.Emulation != vmi.EmulationNever:
		return fmt.Errorf("useEmulation %q: want auto, true or false", c.Emulation)
	case c.PodShape != "" && c.PodShape != vmi.ShapeAuto && c.PodShape != vmi.ShapeModeImageVolumes && c.PodShape != vmi.ShapeModeContainers:
		return fmt.Errorf("launcher pod shape %q: want Auto, ImageVolumes or Containers", c.PodShape)
	case c.CertLifetime < 10*time.Minute:
		return fmt.Errorf("certificate lifetime must be at least 10m (the CSR API minimum), got %s", c.CertLifetime)
	}
	return nil
}

// ConfigMap keys.
const (
	KeyLauncherImage = "launcherImage"
	// KeyUseEmulation is auto, true or false (vmi.EmulationMode).
	KeyUseEmulation = "useEmulation"
	// KeyLauncherPodShape is Auto, ImageVolumes or Containers (vmi.ShapeMode).
	KeyLauncherPodShape   = "launcherPodShape"
	KeyHeartbeatThreshold = "heartbeatThreshold"
	// KeyMigrations holds a YAML or JSON object with KubeVirt's
	// migrations fields (parallelMigrationsPerCluster, bandwidthPerMigration, …).
	KeyMigrations = "migrations"
	// KeyEvictionStrategy is the cluster's default eviction strategy.
	KeyEvictionStrategy = "evictionStrategy"
)

// WithConfigMap returns c overridden by the ConfigMap's keys; a missing
// ConfigMap leaves c unchanged.
func (c Config) WithConfigMap(ctx context.Context, client kubernetes.Interface) (Config, error) {
	if c.ConfigMapName == "" {
		return c, nil
	}
	cm, err := client.CoreV1().ConfigMaps(c.Namespace).Get(ctx, c.ConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read configmap %s/%s: %w", c.Namespace, c.ConfigMapName, err)
	}
	return c.withData(cm.Data)
}

func (c Config) withData(data map[string]string) (Config, error) {
	if v, ok := data[KeyLauncherImage]; ok && v != "" {
		c.LauncherImage = v
	}
	if v, ok := data[KeyUseEmulation]; ok {
		m, err := vmi.ParseEmulationMode(v)
		if err != nil {
			return c, fmt.Errorf("configmap key %s: %w", KeyUseEmulation, err)
		}
		c.Emulation = m
	}
	if v, ok := data[KeyLauncherPodShape]; ok {
		m, err := vmi.ParseShapeMode(v)
		if err != nil {
			return c, fmt.Errorf("configmap key %s: %w", KeyLauncherPodShape, err)
		}
		c.PodShape = m
	}
	if v, ok := data[KeyHeartbeatThreshold]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return c, fmt.Errorf("configmap key %s: %w", KeyHeartbeatThreshold, err)
		}
		c.HeartbeatThreshold = d
	}
	if v, ok := data[KeyMigrations]; ok {
		var m v1.MigrationConfiguration
		if err := yaml.UnmarshalStrict([]byte(v), &m); err != nil {
			return c, fmt.Errorf("configmap key %s: %w", KeyMigrations, err)
		}
		c.Migrations = m
	}
	if v, ok := data[KeyEvictionStrategy]; ok {
		switch s := v1.EvictionStrategy(v); s {
		case "", v1.EvictionStrategyNone, v1.EvictionStrategyLiveMigrate, v1.EvictionStrategyLiveMigrateIfPossible, v1.EvictionStrategyExternal:
			c.EvictionStrategy = s
		default:
			return c, fmt.Errorf("configmap key %s: unknown eviction strategy %q", KeyEvictionStrategy, v)
		}
	}
	return c, nil
}
