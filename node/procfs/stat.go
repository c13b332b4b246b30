package procfs

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ClockTicks is the unit of Stat's times (USER_HZ, 100 on every Linux ABI
// nodevirt runs on).
const ClockTicks = 100

// Stat is the part of a stat line the node reads. Times are in clock
// ticks (ClockTicks per second).
type Stat struct {
	Comm      string // field 2, without its parentheses
	State     string // field 3: R running, S sleeping, Z zombie, ...
	PPID      int    // field 4
	Flags     uint64 // field 9: the kernel's PF_* flags (PF_EXITING 0x4)
	UTime     uint64 // field 14: user mode
	STime     uint64 // field 15: kernel mode
	CUTime    uint64 // field 16: waited-for children, user mode
	CSTime    uint64 // field 17: waited-for children, kernel mode
	StartTime uint64 // field 22: after boot; tells a reused pid apart
}

// Seconds is the CPU time the process or thread used itself (utime +
// stime).
func (s Stat) Seconds() float64 { return float64(s.UTime+s.STime) / ClockTicks }

// ReadStat reads and parses the stat file at path.
func ReadStat(path string) (Stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, fmt.Errorf("read %s: %w", path, err)
	}
	s, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return s, nil
}

// ParseStat parses the content of a stat file. It is pure.
func ParseStat(b []byte) (Stat, error) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("no command name in %q", b)
	}
	f := strings.Fields(string(b[end+1:]))
	// f[0] is field 3, so field n is f[n-3]; starttime (22) is the last
	// one read.
	if len(f) < 22-2 {
		return Stat{}, fmt.Errorf("%d fields after the command name, want at least %d", len(f), 22-2)
	}
	s := Stat{Comm: string(b[open+1 : end]), State: f[0]}
	ppid, err := strconv.Atoi(f[4-3])
	if err != nil {
		return Stat{}, fmt.Errorf("field 4 (ppid): %w", err)
	}
	s.PPID = ppid
	for _, u := range []struct {
		field int
		name  string
		to    *uint64
	}{
		{9, "flags", &s.Flags},
		{14, "utime", &s.UTime},
		{15, "stime", &s.STime},
		{16, "cutime", &s.CUTime},
		{17, "cstime", &s.CSTime},
		{22, "starttime", &s.StartTime},
	} {
		v, err := strconv.ParseUint(f[u.field-3], 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("field %d (%s): %w", u.field, u.name, err)
		}
		*u.to = v
	}
	return s, nil
}
