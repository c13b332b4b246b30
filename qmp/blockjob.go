package qmp

import "context"

// Storage migration of node-local disks (libvirt's "NBD" way, the one that
// works with -blockdev): the target QEMU exports its fresh disks over NBD,
// the source mirrors each disk's data into that export while RAM
// migrates, and the mirrors are finished at the switch-over
// (pause-before-switchover) so the target's disks are complete when the
// guest resumes there.

// BlockJob states of query-block-jobs (the job's "status").
const (
	BlockJobRunning   = "running"
	BlockJobReady     = "ready"
	BlockJobConcluded = "concluded"
)

// BlockJobInfo is one entry of query-block-jobs.
type BlockJobInfo struct {
	Device string `json:"device"` // the job ID
	Type   string `json:"type"`   // "mirror", ...
	Status string `json:"status"` // a BlockJob* value
	Ready  bool   `json:"ready"`
	Len    int64  `json:"len"`
	Offset int64  `json:"offset"`
	Error  string `json:"error,omitempty"`
}

// QueryBlockJobs lists the running block jobs.
func (c *Conn) QueryBlockJobs(ctx context.Context) ([]BlockJobInfo, error) {
	var jobs []BlockJobInfo
	err := c.Execute(ctx, "query-block-jobs", nil, &jobs)
	return jobs, err
}

// BlockdevAddNBD adds block node nodeName: a client of the NBD export
// named export, served on the unix socket path.
func (c *Conn) BlockdevAddNBD(ctx context.Context, nodeName, path, export string) error {
	return c.Execute(ctx, "blockdev-add", map[string]any{
		"driver":    "nbd",
		"node-name": nodeName,
		"server":    map[string]string{"type": "unix", "path": path},
		"export":    export,
	}, nil)
}

// BlockdevDel removes block node nodeName (added by blockdev-add).
func (c *Conn) BlockdevDel(ctx context.Context, nodeName string) error {
	return c.Execute(ctx, "blockdev-del", map[string]string{"node-name": nodeName}, nil)
}

// BlockdevMirror starts block job jobID copying node device into node
// target and mirroring the guest's writes from then on. sync is "top"
// (only what device itself holds, not its backing chain) or "full".
func (c *Conn) BlockdevMirror(ctx context.Context, jobID, device, target, sync string) error {
	return c.Execute(ctx, "blockdev-mirror", map[string]string{
		"job-id": jobID, "device": device, "target": target, "sync": sync,
	}, nil)
}

// BlockJobCancel ends block job id. A ready mirror cancelled without
// force completes: its target holds a consistent copy (the point of the
// switch-over); force abandons the copy.
func (c *Conn) BlockJobCancel(ctx context.Context, id string, force bool) error {
	return c.Execute(ctx, "block-job-cancel", map[string]any{"device": id, "force": force}, nil)
}

// NBDServerStartUnix starts QEMU's NBD server on the unix socket path.
func (c *Conn) NBDServerStartUnix(ctx context.Context, path string) error {
	return c.Execute(ctx, "nbd-server-start", map[string]any{
		"addr": map[string]any{"type": "unix", "data": map[string]string{"path": path}},
	}, nil)
}

// NBDServerStop stops the NBD server (and its exports).
func (c *Conn) NBDServerStop(ctx context.Context) error {
	return c.Execute(ctx, "nbd-server-stop", nil, nil)
}

// BlockExportAddNBD exports block node nodeName on the NBD server under
// name, as export id. A writable export of an incoming QEMU's disk
// activates it for the mirror's writes.
func (c *Conn) BlockExportAddNBD(ctx context.Context, id, nodeName, name string, writable bool) error {
	return c.Execute(ctx, "block-export-add", map[string]any{
		"type": "nbd", "id": id, "node-name": nodeName, "name": name, "writable": writable,
	}, nil)
}

// BlockExportDel removes export id.
func (c *Conn) BlockExportDel(ctx context.Context, id string) error {
	return c.Execute(ctx, "block-export-del", map[string]string{"id": id}, nil)
}

// MigrateContinue lets a migration paused in state (with the
// pause-before-switchover capability: "pre-switchover") go on.
func (c *Conn) MigrateContinue(ctx context.Context, state string) error {
	return c.Execute(ctx, "migrate-continue", map[string]string{"state": state}, nil)
}
