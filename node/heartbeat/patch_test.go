package heartbeat

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPatch(t *testing.T) {
	at := time.Date(2026, 11, 21, 23, 4, 5, 600, time.FixedZone("CET", 3600))
	tests := []struct {
		name     string
		alive    bool
		refusing bool
		labels   map[string]string
		want     string
	}{
		{
			name:  "Alive",
			alive: true,
			want:  `{"metadata":{"labels":{"kubevirt.io/schedulable":"true"},"annotations":{"kubevirt.io/heartbeat":"2026-11-21T22:04:05Z"}}}`,
		},
		{
			name:   "NodeFacts",
			alive:  true,
			labels: map[string]string{"cpumanager": "true", "kubevirt.io/schedulable": "overridden"},
			want:   `{"metadata":{"labels":{"cpumanager":"true","kubevirt.io/schedulable":"true"},"annotations":{"kubevirt.io/heartbeat":"2026-11-21T22:04:05Z"}}}`,
		},
		{
			name:     "AliveRefusingNewVMIs",
			alive:    true,
			refusing: true,
			want:     `{"metadata":{"labels":{"kubevirt.io/schedulable":"false"},"annotations":{"kubevirt.io/heartbeat":"2026-11-21T22:04:05Z"}}}`,
		},
		{
			name:  "Stopping",
			alive: false,
			want:  `{"metadata":{"labels":{"kubevirt.io/schedulable":"false"}}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got, want any
			if err := json.Unmarshal(Patch(tt.alive, tt.alive && !tt.refusing, at, tt.labels), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Patch() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{"Minimal", Config{NodeName: "n0"}, false},
		{"NoNode", Config{}, true},
		{"NegativeInterval", Config{NodeName: "n0", Interval: -time.Second}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}
