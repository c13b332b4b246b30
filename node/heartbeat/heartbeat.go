package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Defaults for Config fields left zero.
const (
	DefaultInterval    = 30 * time.Second
	DefaultStopTimeout = 5 * time.Second
)

// Nodes patches nodes; client-go's CoreV1().Nodes() is one.
type Nodes interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// Config configures a Heartbeat.
type Config struct {
	// NodeName is the node to patch. Required.
	NodeName string
	// Interval between heartbeats. Default 30 s; keep it well below the
	// controller's staleness threshold.
	Interval time.Duration
	// StopTimeout bounds the final schedulable=false patch. Default 5 s.
	StopTimeout time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives failed patches. Default: silent.
	Logger *slog.Logger
	// Labels returns node facts to report as labels with every beat, such
	// as cpumanager=true|false. Optional.
	Labels func() map[string]string
	// Refusing returns why the node takes no new VMIs (its store is
	// full, node/storeguard), "" when it does: while refusing, a beat
	// keeps the heartbeat fresh but says schedulable=false. Optional.
	Refusing func() string
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is required"))
	}
	if c.Interval < 0 || c.StopTimeout < 0 {
		errs = append(errs, errors.New("interval and stop timeout must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("heartbeat config: %w", err)
	}
	return nil
}

// Heartbeat keeps one node's heartbeat fresh. Create it with New and call
// Run once.
type Heartbeat struct {
	cfg   Config
	nodes Nodes
}

// New returns a heartbeat for cfg.NodeName that patches through nodes.
func New(cfg Config, nodes Nodes) (*Heartbeat, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Heartbeat{cfg: cfg, nodes: nodes}, nil
}

// Run beats at once and then every Interval until ctx is cancelled; then it
// marks the node unschedulable and returns that patch's error, if any.
func (h *Heartbeat) Run(ctx context.Context) error {
	tick := time.NewTicker(h.cfg.Interval)
	defer tick.Stop()
	for {
		if err := h.beat(ctx, true); err != nil && ctx.Err() == nil {
			h.cfg.Logger.Warn("heartbeat failed, retrying", "node", h.cfg.NodeName, "err", err, "in", h.cfg.Interval)
		}
		select {
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.cfg.StopTimeout)
			defer cancel()
			return h.beat(stopCtx, false)
		case <-tick.C:
		}
	}
}

// labels are the node facts of this beat.
func (h *Heartbeat) labels() map[string]string {
	if h.cfg.Labels == nil {
		return nil
	}
	return h.cfg.Labels()
}

// refusing is why the node takes no new VMIs, "" when it does.
func (h *Heartbeat) refusing() string {
	if h.cfg.Refusing == nil {
		return ""
	}
	return h.cfg.Refusing()
}

// beat sends one patch.
func (h *Heartbeat) beat(ctx context.Context, alive bool) error {
	schedulable := alive && h.refusing() == ""
	_, err := h.nodes.Patch(ctx, h.cfg.NodeName, types.MergePatchType, Patch(alive, schedulable, h.cfg.Now(), h.labels()), metav1.PatchOptions{FieldManager: v1.ManagerAgent})
	if err != nil {
		return fmt.Errorf("heartbeat node %q (schedulable=%t): %w", h.cfg.NodeName, schedulable, err)
	}
	return nil
}
