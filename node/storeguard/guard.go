package storeguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// ConditionType is the Node condition the guard reports.
const ConditionType corev1.NodeConditionType = "NodevirtStoreFull"

// Reasons of the condition.
const (
	ReasonFull     = "StoreFull"
	ReasonWritable = "StoreHasSpace"
)

// Defaults for Config fields left zero.
const (
	DefaultMinFree  = 32 << 20
	DefaultInterval = 5 * time.Second
)

// Nodes patches nodes; client-go's CoreV1().Nodes() is one.
type Nodes interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// Config configures a Guard.
type Config struct {
	// Dir is a directory on the store's filesystem (the bbolt file's).
	// Required.
	Dir string
	// MinFree is the free space below which the node is full. Default
	// 32 MiB.
	MinFree uint64
	// Interval between checks. Default 5 s.
	Interval time.Duration
	// NodeName is the node whose condition is reported; empty: none is.
	NodeName string
	// Statfs returns the bytes available to the agent under dir. Default:
	// statfs(2).
	Statfs func(dir string) (uint64, error)
	Now    func() time.Time
	Logger *slog.Logger
}

// State is the guard's last assessment.
type State struct {
	Full    bool
	Free    uint64
	MinFree uint64
	// Reason says why the node takes no new VMIs; empty when it does.
	Reason string
}

// Assess is the state for free bytes available against minFree.
func Assess(dir string, free, minFree uint64) State {
	s := State{Free: free, MinFree: minFree}
	if free < minFree {
		s.Full = true
		s.Reason = fmt.Sprintf("the agent's store filesystem (%s) has %s free, below the %s it keeps for its records: this node takes no new VMIs",
			dir, bytes(free), bytes(minFree))
	}
	return s
}

// ConditionPatch is the strategic merge patch of the node's status that
// reports s at now.
func ConditionPatch(s State, now time.Time) []byte {
	c := corev1.NodeCondition{Type: ConditionType, Status: corev1.ConditionFalse, Reason: ReasonWritable,
		Message:           fmt.Sprintf("the agent's store filesystem has %s free (keeps %s)", bytes(s.Free), bytes(s.MinFree)),
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	if s.Full {
		c.Status, c.Reason, c.Message = corev1.ConditionTrue, ReasonFull, s.Reason
	}
	raw, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{c}}})
	if err != nil {
		panic("storeguard: marshal patch: " + err.Error()) // a condition always marshals
	}
	return raw
}

func bytes(n uint64) string {
	return resource.NewQuantity(int64(min(n, 1<<62)), resource.BinarySI).String()
}

// Guard checks the store's filesystem on an interval. Create it with New,
// call Run once; Refusing may be called from any goroutine.
type Guard struct {
	cfg   Config
	nodes Nodes

	mu       sync.Mutex
	state    State
	reported *bool // the Full the node's condition last reported; nil: not yet
}

// New returns a guard; nodes may be nil when cfg.NodeName is empty.
func New(cfg Config, nodes Nodes) (*Guard, error) {
	if cfg.Dir == "" {
		return nil, errors.New("storeguard: Dir is required")
	}
	if cfg.NodeName != "" && nodes == nil {
		return nil, errors.New("storeguard: a node name needs a Nodes client")
	}
	if cfg.MinFree == 0 {
		cfg.MinFree = DefaultMinFree
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Statfs == nil {
		cfg.Statfs = statfs
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	g := &Guard{cfg: cfg, nodes: nodes}
	g.Check()
	return g, nil
}

// Refusing returns why the node takes no new VMIs, or "" when it does.
func (g *Guard) Refusing() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state.Reason
}

// Check assesses the filesystem now and returns the state. A failed
// statfs keeps the previous state.
func (g *Guard) Check() State {
	free, err := g.cfg.Statfs(g.cfg.Dir)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.cfg.Logger.Warn("statfs of the store's filesystem failed", "dir", g.cfg.Dir, "err", err)
		return g.state
	}
	s := Assess(g.cfg.Dir, free, g.cfg.MinFree)
	if s.Full != g.state.Full {
		if s.Full {
			g.cfg.Logger.Error("the store's filesystem is full: taking no new VMIs", "dir", g.cfg.Dir, "free", free, "minFree", g.cfg.MinFree)
		} else if g.state.MinFree != 0 {
			g.cfg.Logger.Info("the store's filesystem has space again: taking new VMIs", "dir", g.cfg.Dir, "free", free)
		}
	}
	g.state = s
	return s
}

// Run checks every Interval until ctx ends, reporting the node condition
// when the state changes (and once at the start).
func (g *Guard) Run(ctx context.Context) error {
	tick := time.NewTicker(g.cfg.Interval)
	defer tick.Stop()
	for {
		s := g.Check()
		if err := g.report(ctx, s); err != nil && ctx.Err() == nil {
			g.cfg.Logger.Warn("report the store condition, retrying", "node", g.cfg.NodeName, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// report patches the node's condition when s.Full differs from what it
// last reported.
func (g *Guard) report(ctx context.Context, s State) error {
	if g.cfg.NodeName == "" {
		return nil
	}
	g.mu.Lock()
	same := g.reported != nil && *g.reported == s.Full
	g.mu.Unlock()
	if same {
		return nil
	}
	if _, err := g.nodes.Patch(ctx, g.cfg.NodeName, types.StrategicMergePatchType, ConditionPatch(s, g.cfg.Now()),
		metav1.PatchOptions{FieldManager: v1.ManagerAgent}, "status"); err != nil {
		return fmt.Errorf("patch node %s condition %s: %w", g.cfg.NodeName, ConditionType, err)
	}
	g.mu.Lock()
	g.reported = &s.Full
	g.mu.Unlock()
	return nil
}

// statfs returns the bytes available to an unprivileged writer under dir
// (the agent runs as root, but the reserved blocks are the system's).
func statfs(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// NodeCondition is the status of n's NodevirtStoreFull condition, "" when
// it has none.
func NodeCondition(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == ConditionType {
			return c.Status
		}
	}
	return ""
}
