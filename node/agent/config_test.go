package agent

import (
	"testing"
	"time"
)

func TestConfig_Validate(t *testing.T) {
	ok := DefaultConfig()
	ok.NodeName = "n1"
	tests := []struct {
		name    string
		mutate  func(*Config)
		wantErr bool
	}{
		{"Defaults", func(*Config) {}, false},
		{"NoNode", func(c *Config) { c.NodeName = "" }, true},
		{"NoKubeletRoot", func(c *Config) { c.KubeletRoot = "" }, true},
		{"NoWorkers", func(c *Config) { c.Workers = 0 }, true},
		{"FastResync", func(c *Config) { c.Resync = time.Millisecond }, true},
		{"TinyTimeout", func(c *Config) { c.CallTimeout = time.Millisecond }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mutate(&c)
			if err := c.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}
