package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
	"github.com/nodevirt/nodevirt/cluster/certsigner"
	"github.com/nodevirt/nodevirt/cluster/client/clientset/versioned"
	"github.com/nodevirt/nodevirt/cluster/liveconfig"
	"github.com/nodevirt/nodevirt/cluster/migration"
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
	// LauncherPullPolicy is the launcher image's pull policy in launcher
	// pods ("": IfNotPresent).
	LauncherPullPolicy corev1.PullPolicy
	// CPUAllocationRatio: a VMI without a CPU request gets 1/ratio of a
	// CPU per vCPU.
	CPUAllocationRatio int
	// FeatureGates are the KubeVirt feature gates the KubeVirt resource
	// names; nodevirt gates nothing, they are reported.
	FeatureGates []string
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
		CPUAllocationRatio: vmi.DefaultCPUAllocationRatio,
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
	case c.CPUAllocationRatio < 1:
		return fmt.Errorf("cpuAllocationRatio must be at least 1, got %d", c.CPUAllocationRatio)
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

// Read returns c (the flags) overridden by the configuration objects in
// c.Namespace as they are now: the ConfigMap's keys, then the KubeVirt
// resource's spec.configuration (liveconfig.Select picks it), validated.
// Missing objects leave c's values.
func (c Config) Read(ctx context.Context, kube kubernetes.Interface, kv versioned.Interface) (Config, error) {
	var cm *corev1.ConfigMap
	if c.ConfigMapName != "" {
		got, err := kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, c.ConfigMapName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return c, fmt.Errorf("read configmap %s/%s: %w", c.Namespace, c.ConfigMapName, err)
		default:
			cm = got
		}
	}
	list, err := kv.KubevirtV1().KubeVirts(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return c, fmt.Errorf("list KubeVirt resources in %s: %w", c.Namespace, err)
	}
	all := make([]*v1.KubeVirt, 0, len(list.Items))
	for i := range list.Items {
		all = append(all, &list.Items[i])
	}
	chosen, _ := liveconfig.Select(all)
	return c.withObjects(cm, chosen)
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

// withKubeVirt returns c overridden by the KubeVirt resource's
// spec.configuration (KubeVirt's field names); unset fields keep c's.
func (c Config) withKubeVirt(kv *v1.KubeVirt) Config {
	conf := kv.Spec.Configuration
	if dc := conf.DeveloperConfiguration; dc != nil {
		switch {
		case dc.UseEmulation == nil:
		case *dc.UseEmulation:
			c.Emulation = vmi.EmulationAlways
		default:
			c.Emulation = vmi.EmulationNever
		}
		if dc.CPUAllocationRatio > 0 {
			c.CPUAllocationRatio = dc.CPUAllocationRatio
		}
		c.FeatureGates = append([]string(nil), dc.FeatureGates...)
	}
	if m := conf.MigrationConfiguration; m != nil {
		c.Migrations = *m.DeepCopy()
	}
	if e := conf.EvictionStrategy; e != nil {
		c.EvictionStrategy = *e
	}
	if conf.ImagePullPolicy != "" {
		c.LauncherPullPolicy = conf.ImagePullPolicy
	}
	return c
}

// withObjects is c (the flags) overridden by the ConfigMap, then by the
// KubeVirt resource (either may be nil), validated.
func (c Config) withObjects(cm *corev1.ConfigMap, kv *v1.KubeVirt) (Config, error) {
	if cm != nil {
		var err error
		if c, err = c.withData(cm.Data); err != nil {
			return c, err
		}
	}
	if kv != nil {
		c = c.withKubeVirt(kv)
	}
	return c, c.Validate()
}

// podConfig is the launcher pod configuration c gives.
func (c Config) podConfig() vmi.PodConfig {
	return vmi.PodConfig{LauncherImage: c.LauncherImage, LauncherPullPolicy: c.LauncherPullPolicy,
		EmulationMode: c.Emulation, ShapeMode: c.PodShape, CPUAllocationRatio: c.CPUAllocationRatio}
}

// migrationConfig is the migration controller's configuration c gives.
func (c Config) migrationConfig() migration.Config {
	return migration.Config{Migrations: c.Migrations, EvictionStrategy: c.EvictionStrategy}
}
