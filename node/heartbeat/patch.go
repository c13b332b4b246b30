package heartbeat

import (
	"encoding/json"
	"strconv"
	"time"

	v1 "github.com/nodevirt/nodevirt/cluster/api/v1"
)

// Patch returns the JSON merge patch for one heartbeat at now: the
// schedulable label, the node facts in labels (e.g. cpumanager) and, when
// alive, the heartbeat annotation. The final patch of a clean stop
// (alive=false, schedulable=false) leaves the last heartbeat in place; a
// live agent that takes no new VMIs beats with schedulable=false.
func Patch(alive, schedulable bool, now time.Time, labels map[string]string) []byte {
	type meta struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations,omitempty"`
	}
	m := meta{Labels: map[string]string{}}
	for k, v := range labels {
		m.Labels[k] = v
	}
	m.Labels[v1.SchedulableLabel] = strconv.FormatBool(schedulable)
	if alive {
		m.Annotations = map[string]string{v1.HeartbeatAnnotation: now.UTC().Format(time.RFC3339)}
	}
	raw, err := json.Marshal(struct {
		Metadata meta `json:"metadata"`
	}{m})
	if err != nil {
		panic("heartbeat: marshal patch: " + err.Error()) // maps of strings always marshal
	}
	return raw
}
