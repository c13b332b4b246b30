package qmp

import (
	"context"
	"fmt"
	"time"
)

// Ping checks that the guest agent answers.
func (a *Agent) Ping(ctx context.Context) error {
	return a.Execute(ctx, "guest-ping", nil, nil)
}

// AgentInfo is the reply of guest-info.
type AgentInfo struct {
	Version  string `json:"version"`
	Commands []struct {
		Name            string `json:"name"`
		Enabled         bool   `json:"enabled"`
		SuccessResponse bool   `json:"success-response"`
	} `json:"supported_commands"`
}

// Info returns the agent's version and command set.
func (a *Agent) Info(ctx context.Context) (AgentInfo, error) {
	var i AgentInfo
	err := a.Execute(ctx, "guest-info", nil, &i)
	return i, err
}

// OSInfo is the reply of guest-get-osinfo (os-release plus uname).
type OSInfo struct {
	KernelRelease string `json:"kernel-release,omitempty"`
	KernelVersion string `json:"kernel-version,omitempty"`
	Machine       string `json:"machine,omitempty"`
	ID            string `json:"id,omitempty"`
	Name          string `json:"name,omitempty"`
	PrettyName    string `json:"pretty-name,omitempty"`
	Version       string `json:"version,omitempty"`
	VersionID     string `json:"version-id,omitempty"`
	Variant       string `json:"variant,omitempty"`
	VariantID     string `json:"variant-id,omitempty"`
}

// OSInfo returns the guest operating system's identity.
func (a *Agent) OSInfo(ctx context.Context) (OSInfo, error) {
	var o OSInfo
	err := a.Execute(ctx, "guest-get-osinfo", nil, &o)
	return o, err
}

// HostName returns the guest's host name.
func (a *Agent) HostName(ctx context.Context) (string, error) {
	var h struct {
		HostName string `json:"host-name"`
	}
	err := a.Execute(ctx, "guest-get-host-name", nil, &h)
	return h.HostName, err
}

// User is one logged-in guest user.
type User struct {
	User      string  `json:"user"`
	Domain    string  `json:"domain,omitempty"`
	LoginTime float64 `json:"login-time"` // seconds since the epoch
}

// Users lists the users logged in to the guest.
func (a *Agent) Users(ctx context.Context) ([]User, error) {
	var u []User
	err := a.Execute(ctx, "guest-get-users", nil, &u)
	return u, err
}

// FSInfo is one mounted guest file system.
type FSInfo struct {
	Name       string `json:"name"`
	Mountpoint string `json:"mountpoint"`
	Type       string `json:"type"`
	UsedBytes  uint64 `json:"used-bytes,omitempty"`
	TotalBytes uint64 `json:"total-bytes,omitempty"`
	Disks      []struct {
		BusType string `json:"bus-type"`
		Bus     int    `json:"bus"`
		Target  int    `json:"target"`
		Unit    int    `json:"unit"`
		Serial  string `json:"serial,omitempty"`
		Dev     string `json:"dev,omitempty"`
	} `json:"disk"`
}

// FSInfo lists the guest's mounted file systems.
func (a *Agent) FSInfo(ctx context.Context) ([]FSInfo, error) {
	var f []FSInfo
	err := a.Execute(ctx, "guest-get-fsinfo", nil, &f)
	return f, err
}

// Timezone is the reply of guest-get-timezone.
type Timezone struct {
	Zone   string `json:"zone,omitempty"`
	Offset int    `json:"offset"` // seconds east of UTC
}

// Timezone returns the guest's time zone.
func (a *Agent) Timezone(ctx context.Context) (Timezone, error) {
	var tz Timezone
	err := a.Execute(ctx, "guest-get-timezone", nil, &tz)
	return tz, err
}

// NetworkInterface is one guest network interface.
type NetworkInterface struct {
	Name            string `json:"name"`
	HardwareAddress string `json:"hardware-address,omitempty"`
	IPAddresses     []struct {
		Type    string `json:"ip-address-type"` // "ipv4" or "ipv6"
		Address string `json:"ip-address"`
		Prefix  int    `json:"prefix"`
	} `json:"ip-addresses,omitempty"`
}

// NetworkInterfaces lists the guest's network interfaces and addresses.
func (a *Agent) NetworkInterfaces(ctx context.Context) ([]NetworkInterface, error) {
	var n []NetworkInterface
	err := a.Execute(ctx, "guest-network-get-interfaces", nil, &n)
	return n, err
}

// FSFreezeFreeze freezes the guest's file systems and returns how many.
func (a *Agent) FSFreezeFreeze(ctx context.Context) (int, error) {
	var n int
	err := a.Execute(ctx, "guest-fsfreeze-freeze", nil, &n)
	return n, err
}

// FSFreezeThaw thaws the guest's file systems and returns how many.
func (a *Agent) FSFreezeThaw(ctx context.Context) (int, error) {
	var n int
	err := a.Execute(ctx, "guest-fsfreeze-thaw", nil, &n)
	return n, err
}

// FSFreezeStatus returns "thawed" or "frozen".
func (a *Agent) FSFreezeStatus(ctx context.Context) (string, error) {
	var s string
	err := a.Execute(ctx, "guest-fsfreeze-status", nil, &s)
	return s, err
}

// Shutdown modes for Agent.Shutdown.
const (
	ShutdownPowerdown = "powerdown"
	ShutdownReboot    = "reboot"
	ShutdownHalt      = "halt"
)

// Shutdown asks the guest OS to power down, reboot or halt. qemu-ga does not
// answer this command; success means it was sent.
func (a *Agent) Shutdown(ctx context.Context, mode string) error {
	return a.executeNoReply(ctx, "guest-shutdown", map[string]string{"mode": mode})
}

// ExecStatus is the reply of guest-exec-status.
type ExecStatus struct {
	Exited       bool   `json:"exited"`
	ExitCode     *int   `json:"exitcode,omitempty"`
	Signal       *int   `json:"signal,omitempty"`
	OutData      []byte `json:"out-data,omitempty"` // base64 on the wire
	ErrData      []byte `json:"err-data,omitempty"`
	OutTruncated bool   `json:"out-truncated,omitempty"`
	ErrTruncated bool   `json:"err-truncated,omitempty"`
}

// Exec starts path with args in the guest (output captured) and returns its
// guest pid for ExecStatus.
func (a *Agent) Exec(ctx context.Context, path string, args ...string) (int, error) {
	req := struct {
		Path          string   `json:"path"`
		Arg           []string `json:"arg,omitempty"`
		CaptureOutput bool     `json:"capture-output"`
	}{Path: path, Arg: args, CaptureOutput: true}
	var r struct {
		PID int `json:"pid"`
	}
	if err := a.Execute(ctx, "guest-exec", req, &r); err != nil {
		return 0, fmt.Errorf("exec %q: %w", path, err)
	}
	return r.PID, nil
}

// ExecStatus returns the state of a process started by Exec. Once it
// reports Exited, qemu-ga forgets the pid.
func (a *Agent) ExecStatus(ctx context.Context, pid int) (ExecStatus, error) {
	var st ExecStatus
	err := a.Execute(ctx, "guest-exec-status", map[string]int{"pid": pid}, &st)
	return st, err
}

// Run starts path with args in the guest and polls until it exits or ctx
// ends.
func (a *Agent) Run(ctx context.Context, path string, args ...string) (ExecStatus, error) {
	pid, err := a.Exec(ctx, path, args...)
	if err != nil {
		return ExecStatus{}, err
	}
	wait := 5 * time.Millisecond
	for {
		st, err := a.ExecStatus(ctx, pid)
		if err != nil || st.Exited {
			return st, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, fmt.Errorf("exec %q: %w", path, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}
