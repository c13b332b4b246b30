package qmp

import "context"

// MigrationStatus values of query-migrate and the MIGRATION event.
const (
	MigrationNone      = "none"
	MigrationSetup     = "setup"
	MigrationActive    = "active"
	MigrationPostcopy  = "postcopy-active"
	MigrationDevice    = "device"
	MigrationCompleted = "completed"
	MigrationFailed    = "failed"
	MigrationCancelled = "cancelled"
	MigrationCanceling = "cancelling"
	MigrationPreSwitch = "pre-switchover"
	MigrationWaitUnplg = "wait-unplug"
)

// MigrationRAM is the RAM part of MigrationInfo.
type MigrationRAM struct {
	Transferred      int64   `json:"transferred"`
	Remaining        int64   `json:"remaining"`
	Total            int64   `json:"total"`
	Duplicate        int64   `json:"duplicate"`
	Normal           int64   `json:"normal"`
	NormalBytes      int64   `json:"normal-bytes"`
	DirtyPagesRate   int64   `json:"dirty-pages-rate"`
	MBps             float64 `json:"mbps"`
	DirtySyncCount   int64   `json:"dirty-sync-count"`
	PageSize         int64   `json:"page-size"`
	PrecopyBytes     int64   `json:"precopy-bytes"`
	DowntimeBytes    int64   `json:"downtime-bytes"`
	PostcopyRequests int64   `json:"postcopy-requests"`
}

// MigrationInfo is the reply of query-migrate. Optional members are
// pointers: QEMU only reports them in some states.
type MigrationInfo struct {
	Status           string        `json:"status"` // a Migration* value; "" before any migration
	RAM              *MigrationRAM `json:"ram,omitempty"`
	TotalTime        *int64        `json:"total-time,omitempty"`        // ms
	Downtime         *int64        `json:"downtime,omitempty"`          // ms, once completed
	ExpectedDowntime *int64        `json:"expected-downtime,omitempty"` // ms, while active
	SetupTime        *int64        `json:"setup-time,omitempty"`        // ms
	ErrorDesc        string        `json:"error-desc,omitempty"`        // why it failed
}

// QueryMigrate returns the state of the current or last migration.
// QEMU may report "completed" a moment before it fills in TotalTime and
// Downtime and before the source's run state turns postmigrate; poll on
// until those appear if you need them.
func (c *Conn) QueryMigrate(ctx context.Context) (MigrationInfo, error) {
	var mi MigrationInfo
	err := c.Execute(ctx, "query-migrate", nil, &mi)
	return mi, err
}

// Migrate starts migrating the VM to uri ("unix:/path", "tcp:host:port",
// "fd:name", ...). It returns once the migration started; follow it with
// QueryMigrate or MIGRATION events.
func (c *Conn) Migrate(ctx context.Context, uri string) error {
	return c.Execute(ctx, "migrate", map[string]string{"uri": uri}, nil)
}

// MigrateIncoming makes a QEMU started with "-incoming defer" listen on uri.
func (c *Conn) MigrateIncoming(ctx context.Context, uri string) error {
	return c.Execute(ctx, "migrate-incoming", map[string]string{"uri": uri}, nil)
}

// MigrateCancel cancels the current outgoing migration.
func (c *Conn) MigrateCancel(ctx context.Context) error {
	return c.Execute(ctx, "migrate_cancel", nil, nil)
}

// MigrationCapability turns one migration capability on or off.
type MigrationCapability struct {
	Capability string `json:"capability"` // e.g. "events", "auto-converge", "postcopy-ram"
	State      bool   `json:"state"`
}

// MigrateSetCapabilities sets migration capabilities (before Migrate).
func (c *Conn) MigrateSetCapabilities(ctx context.Context, caps ...MigrationCapability) error {
	return c.Execute(ctx, "migrate-set-capabilities",
		map[string][]MigrationCapability{"capabilities": caps}, nil)
}

// MigrationParameters are the tunables of migrate-set-parameters; nil
// members are left unchanged.
type MigrationParameters struct {
	MaxBandwidth         *int64  `json:"max-bandwidth,omitempty"`  // bytes/s
	DowntimeLimit        *int64  `json:"downtime-limit,omitempty"` // ms
	MultifdChannels      *int64  `json:"multifd-channels,omitempty"`
	CPUThrottleInitial   *int64  `json:"cpu-throttle-initial,omitempty"`
	CPUThrottleIncrement *int64  `json:"cpu-throttle-increment,omitempty"`
	MaxCPUThrottle       *int64  `json:"max-cpu-throttle,omitempty"`
	XBZRLECacheSize      *int64  `json:"xbzrle-cache-size,omitempty"`
	MaxPostcopyBandwidth *int64  `json:"max-postcopy-bandwidth,omitempty"`
	TLSCreds             *string `json:"tls-creds,omitempty"`
	TLSHostname          *string `json:"tls-hostname,omitempty"`
}

// MigrateSetParameters changes migration tunables.
func (c *Conn) MigrateSetParameters(ctx context.Context, p MigrationParameters) error {
	return c.Execute(ctx, "migrate-set-parameters", p, nil)
}
