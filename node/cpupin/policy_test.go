package cpupin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestStaticPolicy(t *testing.T) {
	tests := []struct {
		name, state string
		want, err   bool
	}{
		{name: "NoStateFile"},
		{name: "None", state: `{"policyName":"none","defaultCpuSet":"","checksum":1}`},
		{name: "Static", state: `{"policyName":"static","defaultCpuSet":"0,3","entries":{},"checksum":2}`, want: true},
		{name: "Corrupt", state: `{`, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if tc.state != "" {
				if err := os.WriteFile(filepath.Join(root, StateFile), []byte(tc.state), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := StaticPolicy(root)
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("StaticPolicy = %t, %v; want %t, error %t", got, err, tc.want, tc.err)
			}
		})
	}
}
