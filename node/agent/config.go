package agent

import (
	"errors"
	"fmt"
	"time"
)

// Config is the agent's configuration (the ConfigMap, flags).
type Config struct {
	// NodeName is the node this agent runs on; it watches only VMIs
	// labelled kubevirt.io/nodeName=<NodeName> and pods on this node.
	NodeName string
	// KubeletRoot is the kubelet's root directory as the agent sees it.
	KubeletRoot string
	// AllowEmulation lets VMs run under TCG when KVM is unusable.
	AllowEmulation bool
	// Workers is the number of VMIs synced in parallel. A sync mostly
	// waits (launcher, QMP, netlink, API server), so there are many: a
	// burst of new VMIs or a restart's re-adoption of every VM must not
	// queue behind a few slow syncs.
	Workers int
	// Resync is the period of the safety-net resync of every VMI and
	// record.
	Resync time.Duration
	// CallTimeout bounds every call to QEMU, the launcher and the API.
	CallTimeout time.Duration
	// SoftRebootTimeout is how long a soft reboot without a guest agent
	// waits for the guest to shut down on the ACPI power button before it
	// is abandoned (the node API's softreboot waits as long).
	SoftRebootTimeout time.Duration
	// MigrationAddress is where other agents reach this agent's migration
	// channel (the agent pod's IP and migration port), written to
	// migrationState.targetNodeAddress; "" makes this node refuse to be a
	// migration target.
	MigrationAddress string
}

// DefaultConfig returns the defaults for everything but NodeName.
func DefaultConfig() Config {
	return Config{
		KubeletRoot: "/var/lib/kubelet",
		Workers:     16,
		Resync:      30 * time.Second,
		CallTimeout: 10 * time.Second,
		// Below the node API's softreboot bound (55 s) and the
		// kube-apiserver's request timeout (60 s).
		SoftRebootTimeout: 50 * time.Second,
	}
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("node name is empty"))
	}
	if c.KubeletRoot == "" {
		errs = append(errs, errors.New("kubelet root is empty"))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("workers %d, want >= 1", c.Workers))
	}
	if c.Resync < time.Second {
		errs = append(errs, fmt.Errorf("resync %v, want >= 1s", c.Resync))
	}
	if c.CallTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("call timeout %v, want >= 100ms", c.CallTimeout))
	}
	if c.SoftRebootTimeout < time.Second {
		errs = append(errs, fmt.Errorf("soft reboot timeout %v, want >= 1s", c.SoftRebootTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agent config: %w", err)
	}
	return nil
}
