package qmp

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
)

// BalloonInfo is the reply of query-balloon.
type BalloonInfo struct {
	Actual int64 `json:"actual"` // guest memory in bytes after ballooning
}

// QueryBalloon returns the guest's current memory size as seen through the
// balloon. It fails with class DeviceNotActive when there is no balloon.
func (c *Conn) QueryBalloon(ctx context.Context) (BalloonInfo, error) {
	var b BalloonInfo
	err := c.Execute(ctx, "query-balloon", nil, &b)
	return b, err
}

// Balloon asks the guest to shrink or grow to target bytes of memory.
func (c *Conn) Balloon(ctx context.Context, target int64) error {
	return c.Execute(ctx, "balloon", map[string]int64{"value": target}, nil)
}

// QOMGet reads property of the QOM object at path into result.
func (c *Conn) QOMGet(ctx context.Context, path, property string, result any) error {
	args := map[string]string{"path": path, "property": property}
	if err := c.Execute(ctx, "qom-get", args, result); err != nil {
		return fmt.Errorf("%s.%s: %w", path, property, err)
	}
	return nil
}

// QOMSet sets property of the QOM object at path to value.
func (c *Conn) QOMSet(ctx context.Context, path, property string, value any) error {
	args := map[string]any{"path": path, "property": property, "value": value}
	if err := c.Execute(ctx, "qom-set", args, nil); err != nil {
		return fmt.Errorf("%s.%s: %w", path, property, err)
	}
	return nil
}

// BalloonStats are the guest memory statistics a virtio-balloon reports.
// Stats maps QEMU's names ("stat-free-memory", "stat-total-memory",
// "stat-available-memory", "stat-swap-in", ...) to values; a statistic the
// guest does not provide is -1. LastUpdate is the guest's report time in
// seconds since the epoch (0: no report yet).
type BalloonStats struct {
	Stats      map[string]int64
	LastUpdate int64
}

// SetBalloonStatsInterval makes the guest report memory statistics every
// seconds (0 turns reporting off). path is the balloon device's QOM path,
// e.g. "/machine/peripheral/balloon0" for a device with id balloon0.
func (c *Conn) SetBalloonStatsInterval(ctx context.Context, path string, seconds int) error {
	return c.QOMSet(ctx, path, "guest-stats-polling-interval", seconds)
}

// QueryBalloonStats returns the balloon's latest guest memory statistics.
func (c *Conn) QueryBalloonStats(ctx context.Context, path string) (BalloonStats, error) {
	var raw struct {
		Stats      map[string]json.Number `json:"stats"`
		LastUpdate int64                  `json:"last-update"`
	}
	if err := c.QOMGet(ctx, path, "guest-stats", &raw); err != nil {
		return BalloonStats{}, err
	}
	st := BalloonStats{Stats: make(map[string]int64, len(raw.Stats)), LastUpdate: raw.LastUpdate}
	for k, v := range raw.Stats {
		n, err := v.Int64()
		if err != nil || n == math.MaxInt64 {
			n = -1 // QEMU reports a missing statistic as (uint64)-1
		}
		st.Stats[k] = n
	}
	return st, nil
}
