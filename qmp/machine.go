package qmp

import (
	"context"
	"fmt"
)

// CPUInfo is one vCPU as reported by query-cpus-fast.
type CPUInfo struct {
	CPUIndex int    `json:"cpu-index"`
	QOMPath  string `json:"qom-path"`
	ThreadID int    `json:"thread-id"` // host thread running the vCPU
	Target   string `json:"target"`
	Props    struct {
		NodeID   *int `json:"node-id,omitempty"`
		SocketID *int `json:"socket-id,omitempty"`
		DieID    *int `json:"die-id,omitempty"`
		CoreID   *int `json:"core-id,omitempty"`
		ThreadID *int `json:"thread-id,omitempty"`
	} `json:"props"`
}

// QueryCPUsFast lists the vCPUs without interrupting them.
func (c *Conn) QueryCPUsFast(ctx context.Context) ([]CPUInfo, error) {
	var cpus []CPUInfo
	err := c.Execute(ctx, "query-cpus-fast", nil, &cpus)
	return cpus, err
}

// KVMInfo is the reply of query-kvm.
type KVMInfo struct {
	Enabled bool `json:"enabled"` // the VM uses KVM (false under TCG)
	Present bool `json:"present"` // QEMU was built with KVM support
}

// QueryKVM reports whether the VM runs under KVM.
func (c *Conn) QueryKVM(ctx context.Context) (KVMInfo, error) {
	var k KVMInfo
	err := c.Execute(ctx, "query-kvm", nil, &k)
	return k, err
}

// ChardevInfo is one character device as reported by query-chardev.
type ChardevInfo struct {
	Label        string `json:"label"`
	Filename     string `json:"filename"` // e.g. "unix:/path,server=on"
	FrontendOpen bool   `json:"frontend-open"`
}

// QueryChardev lists the character devices (serial, guest agent, QMP...).
func (c *Conn) QueryChardev(ctx context.Context) ([]ChardevInfo, error) {
	var devs []ChardevInfo
	err := c.Execute(ctx, "query-chardev", nil, &devs)
	return devs, err
}

// DeviceAdd hot-plugs a device: driver is the QEMU device type, id its
// name for DeviceDel, props its further properties (may be nil).
func (c *Conn) DeviceAdd(ctx context.Context, driver, id string, props map[string]any) error {
	args := make(map[string]any, len(props)+2)
	for k, v := range props {
		args[k] = v
	}
	args["driver"] = driver
	args["id"] = id
	if err := c.Execute(ctx, "device_add", args, nil); err != nil {
		return fmt.Errorf("device %q: %w", id, err)
	}
	return nil
}

// DeviceDel asks the guest to release device id. Removal completes
// asynchronously; QEMU then emits DEVICE_DELETED.
func (c *Conn) DeviceDel(ctx context.Context, id string) error {
	if err := c.Execute(ctx, "device_del", map[string]string{"id": id}, nil); err != nil {
		return fmt.Errorf("device %q: %w", id, err)
	}
	return nil
}
