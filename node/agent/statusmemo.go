package agent

import (
	"bytes"
	"encoding/json"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// statusMemo is the agent's last status write of a VMI: the
// resourceVersion of the VMI the status was derived from, and the status
// written, as JSON (second-precision times, as the API server keeps them).
//
// A sync that starts again from that resourceVersion runs on an informer
// cache that has not seen the write yet. If it derives the same status,
// writing it again can only fail (the write carries the resourceVersion
// as a precondition) and costs the API server a full server-side apply: it
// is skipped, and the write's watch event brings the VMI back to the queue.
type statusMemo struct {
	fromRV string
	status []byte
}

// wrote remembers that s was written over the VMI at resourceVersion rv.
func (d *domain) wrote(rv string, s v1.VirtualMachineInstanceStatus) {
	b, err := json.Marshal(s)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.lastWrite = statusMemo{}
		return
	}
	d.lastWrite = statusMemo{fromRV: rv, status: b}
}

// alreadyWrote reports whether s is what the last write put over the VMI
// at resourceVersion rv.
func (d *domain) alreadyWrote(rv string, s v1.VirtualMachineInstanceStatus) bool {
	d.mu.Lock()
	m := d.lastWrite
	d.mu.Unlock()
	if m.fromRV == "" || m.fromRV != rv {
		return false
	}
	b, err := json.Marshal(s)
	return err == nil && bytes.Equal(b, m.status)
}
