package deviceplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Defaults for Config fields left zero.
const (
	// DefaultDir is where the kubelet (v1.34) serves kubelet.sock. It is
	// fixed: the kubelet's --root-dir does not move it.
	DefaultDir          = "/var/lib/kubelet/device-plugins"
	DefaultCount        = 110
	DefaultPollInterval = time.Second
	// KubeletSocket is the kubelet's registration socket in Config.Dir.
	KubeletSocket = "kubelet.sock"
)

// Config configures a Plugin.
type Config struct {
	// Dir is the kubelet's device-plugin directory, where kubelet.sock
	// lives and the plugin creates its own socket. Default DefaultDir.
	Dir string
	// Count is the number of devices advertised; it caps how many
	// containers on the node may hold the device at once. Default 110
	// (the kubelet's default pod limit).
	Count int
	// PollInterval is how often the plugin checks for a kubelet restart
	// and the device node's health. Default 1 s.
	PollInterval time.Duration
	// RegisterTimeout bounds one registration call. Default 10 s.
	RegisterTimeout time.Duration
	// Host is the host's root file system, for device health checks.
	// Default os.DirFS("/").
	Host fs.FS
	// Logger receives registration and health events. Default: silent.
	Logger *slog.Logger
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.Count == 0 {
		c.Count = DefaultCount
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RegisterTimeout == 0 {
		c.RegisterTimeout = 10 * time.Second
	}
	if c.Host == nil {
		c.Host = os.DirFS("/")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.Dir != "" && !filepath.IsAbs(c.Dir) {
		errs = append(errs, fmt.Errorf("dir %q: must be absolute", c.Dir))
	}
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("count %d: must not be negative", c.Count))
	}
	if c.PollInterval < 0 || c.RegisterTimeout < 0 {
		errs = append(errs, errors.New("poll interval and register timeout must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deviceplugin config: %w", err)
	}
	return nil
}
