package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Kind is a fault the harness injects.
type Kind string

// The faults, in the order the report lists them.
const (
	// AgentKill SIGKILLs the agent's host process; the kubelet restarts
	// its container.
	AgentKill Kind = "agent-sigkill"
	// LauncherKill SIGKILLs the victim VM's launcher process.
	LauncherKill Kind = "launcher-sigkill"
	// QEMUKill SIGKILLs the victim VM's QEMU process.
	QEMUKill Kind = "qemu-sigkill"
	// ControllerKill SIGKILLs the controller leader's process.
	ControllerKill Kind = "controller-leader-sigkill"
	// KubeletRestart restarts the node's kubelet (SIGTERM, start again).
	KubeletRestart Kind = "kubelet-restart"
	// ContainerdRestart restarts the node's containerd; containers keep
	// running in their shims.
	ContainerdRestart Kind = "containerd-restart"
	// APIServerOutage stops kube-apiserver for APIServerDown.
	APIServerOutage Kind = "apiserver-outage"
	// StoreFull fills the filesystem of the agent's store (its bbolt
	// file) for StoreFullHold, then frees it.
	StoreFull Kind = "store-full"
)

// Kinds lists every fault kind in report order.
var Kinds = []Kind{AgentKill, LauncherKill, QEMUKill, ControllerKill, KubeletRestart, ContainerdRestart, APIServerOutage, StoreFull}

// StoreFullHold is how long a StoreFull keeps the store's filesystem full.
const StoreFullHold = 15 * time.Second

// APIServerDown is how long an APIServerOutage keeps kube-apiserver down.
const APIServerDown = 30 * time.Second

// Fault is one scheduled fault: Gap is the wait before it (the workload
// runs meanwhile, so the fault lands at a random point of its steps).
type Fault struct {
	Seq  int           `json:"seq"`
	Kind Kind          `json:"kind"`
	Gap  time.Duration `json:"gap"`
}

// Config is what a run's schedule is drawn from.
type Config struct {
	Seed int64
	// AgentKills is the number of agent SIGKILLs.
	AgentKills int
	// EachOther is how many times every other kind is injected.
	EachOther int
	// MaxGap bounds the random wait before a fault.
	MaxGap time.Duration
}

// Validate names the first bad setting.
func (c Config) Validate() error {
	switch {
	case c.AgentKills < 0:
		return fmt.Errorf("agent kills %d: want ≥ 0", c.AgentKills)
	case c.EachOther < 0:
		return fmt.Errorf("faults of each other kind %d: want ≥ 0", c.EachOther)
	case c.MaxGap <= 0:
		return fmt.Errorf("max gap %v: want > 0", c.MaxGap)
	}
	return nil
}

// Schedule is the run's faults in order, a pure function of c: the same
// seed gives the same faults, gaps and order.
func Schedule(c Config) []Fault {
	var kinds []Kind
	for range c.AgentKills {
		kinds = append(kinds, AgentKill)
	}
	for _, k := range Kinds[1:] {
		for range c.EachOther {
			kinds = append(kinds, k)
		}
	}
	r := rand.New(rand.NewPCG(uint64(c.Seed), 0x6e6f64657669727))
	r.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	out := make([]Fault, len(kinds))
	for i, k := range kinds {
		gap := time.Duration(r.Int64N(int64(c.MaxGap/time.Millisecond)+1)) * time.Millisecond
		out[i] = Fault{Seq: i + 1, Kind: k, Gap: gap}
	}
	return out
}
