package qmp

import "context"

// BlockStats is one block device's I/O counters from query-blockstats.
type BlockStats struct {
	Device   string `json:"device"`    // drive id (legacy -drive), may be empty
	NodeName string `json:"node-name"` // block node, may be empty
	QDev     string `json:"qdev"`      // the guest device's id or QOM path
	Stats    struct {
		RdBytes         uint64 `json:"rd_bytes"`
		WrBytes         uint64 `json:"wr_bytes"`
		RdOperations    uint64 `json:"rd_operations"`
		WrOperations    uint64 `json:"wr_operations"`
		FlushOperations uint64 `json:"flush_operations"`
		RdTotalTimeNS   uint64 `json:"rd_total_time_ns"`
		WrTotalTimeNS   uint64 `json:"wr_total_time_ns"`
		FlushTotalTime  uint64 `json:"flush_total_time_ns"`
		WrHighestOffset uint64 `json:"wr_highest_offset"`
	} `json:"stats"`
}

// QueryBlockstats returns I/O counters of every block device.
func (c *Conn) QueryBlockstats(ctx context.Context) ([]BlockStats, error) {
	var bs []BlockStats
	err := c.Execute(ctx, "query-blockstats", nil, &bs)
	return bs, err
}
