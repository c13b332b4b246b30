package cpupin

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlan(t *testing.T) {
	tests := []struct {
		name    string
		vcpus   []int
		others  []int
		allowed []int
		isolate bool
		want    []Pin
		wantErr error
	}{
		{
			name: "VCPUsOneToOneEmulatorShares", vcpus: []int{11, 12}, others: []int{10, 13}, allowed: []int{2, 3},
			want: []Pin{{11, []int{2}}, {12, []int{3}}, {10, []int{2, 3}}, {13, []int{2, 3}}},
		},
		{
			name: "EmulatorIsolated", vcpus: []int{11, 12}, others: []int{10}, allowed: []int{4, 5, 6}, isolate: true,
			want: []Pin{{11, []int{4}}, {12, []int{5}}, {10, []int{6}}},
		},
		{
			name: "MoreCPUsThanNeededUsesTheFirst", vcpus: []int{11}, allowed: []int{0, 1, 2, 3},
			want: []Pin{{11, []int{0}}},
		},
		{name: "TooFewForVCPUs", vcpus: []int{11, 12}, allowed: []int{0}, wantErr: ErrTooFewCPUs},
		{name: "TooFewForEmulator", vcpus: []int{11, 12}, allowed: []int{0, 1}, isolate: true, wantErr: ErrTooFewCPUs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Plan(tc.vcpus, tc.others, tc.allowed, tc.isolate)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Plan(nil, nil, []int{0}, false); err == nil {
		t.Error("a plan without vCPU threads succeeded")
	}
}

func TestParseList(t *testing.T) {
	tests := map[string][]int{
		"":            nil,
		"0":           {0},
		"0-3\n":       {0, 1, 2, 3},
		"0-1,8,10-11": {0, 1, 8, 10, 11},
		"3,1,1-2":     {1, 2, 3},
	}
	for in, want := range tests {
		got, err := ParseList(in)
		if err != nil {
			t.Errorf("ParseList(%q): %v", in, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseList(%q) (-want +got):\n%s", in, diff)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1-", "1,,2"} {
		if _, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) succeeded", bad)
		}
	}
}
