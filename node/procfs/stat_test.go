package procfs

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, in string
		want     Stat
		wantErr  string
	}{
		{
			name: "vCPU thread",
			in:   "43 (CPU 0/TCG) S 1 1 1 0 -1 0 0 0 0 0 250 50 0 0 20 0 1 0 100 0 0\n",
			want: Stat{Comm: "CPU 0/TCG", State: "S", PPID: 1, UTime: 250, STime: 50, StartTime: 100},
		},
		{
			name: "command name with a space and parentheses",
			in:   "4242 (runc:[2:INIT) x) S 17 4242 4242 0 -1 4194560 120 0 0 0 7 5 3 2 20 0 1 0 98765 1000 10 18446744073709551615",
			want: Stat{Comm: "runc:[2:INIT) x", State: "S", PPID: 17, Flags: 4194560, UTime: 7, STime: 5, CUTime: 3, CSTime: 2, StartTime: 98765},
		},
		{name: "empty", in: "", wantErr: "no command name"},
		{name: "no parentheses", in: "42 a R 1\n", wantErr: "no command name"},
		{name: "short", in: "42 (a) R 1 1\n", wantErr: "fields after the command name"},
		{name: "bad ppid", in: "42 (a) R x 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 100 0 0\n", wantErr: "field 4 (ppid)"},
		{name: "bad flags", in: "42 (a) R 1 1 1 0 -1 z 0 0 0 0 1 2 0 0 20 0 1 0 100 0 0\n", wantErr: "field 9 (flags)"},
		{name: "bad utime", in: "42 (a) R 1 1 1 0 -1 0 0 0 0 0 x 2 0 0 20 0 1 0 100 0 0\n", wantErr: "field 14 (utime)"},
		{name: "bad starttime", in: "42 (a) R 1 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 y 0 0\n", wantErr: "field 22 (starttime)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseStat([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseStat error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ParseStat = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSeconds(t *testing.T) {
	if got := (Stat{UTime: 250, STime: 50}).Seconds(); got != 3 {
		t.Errorf("Seconds = %v, want 3", got)
	}
}

func TestReadStat_Self(t *testing.T) {
	pid := os.Getpid()
	s, err := ReadStat(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	if s.PPID != os.Getppid() {
		t.Errorf("PPID = %d, want %d", s.PPID, os.Getppid())
	}
	if s.StartTime == 0 || s.State == "" || s.Comm == "" {
		t.Errorf("ReadStat = %+v, want a start time, a state and a command name", s)
	}
	if _, err := ReadStat("/proc/0/stat"); err == nil || !strings.Contains(err.Error(), "/proc/0/stat") {
		t.Errorf("ReadStat(/proc/0/stat) error = %v, want one naming the path", err)
	}
}
