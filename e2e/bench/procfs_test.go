package main

import (
	"os"
	"strings"
	"testing"
)

const smapsSample = `55d0c0000000-55d0c0100000 r-xp 00000000 08:01 1234 /usr/bin/qemu-system-x86_64
Size:               1024 kB
Rss:                 900 kB
7f0000000000-7f0004000000 rw-p 00000000 00:00 0
Size:              65536 kB
Rss:                 100 kB
7f1000000000-7f1004200000 rw-p 00000000 00:00 0
Size:              67584 kB
Rss:                2048 kB
Pss:                2048 kB
7f2000000000-7f2000001000 rw-p 00000000 00:00 0 [heap]
Size:                  4 kB
Rss:                   4 kB
`

func TestParseGuestRAM(t *testing.T) {
	const guest = 64 << 20
	// The 64 MiB mapping is the first anonymous one of the right size; the
	// 66 MiB one (within the slack) comes after it.
	got, err := parseGuestRAM(strings.NewReader(smapsSample), guest)
	if err != nil {
		t.Fatal(err)
	}
	if got != 100<<10 {
		t.Errorf("guest RAM resident = %d, want %d", got, 100<<10)
	}
	if _, err := parseGuestRAM(strings.NewReader(smapsSample), 1<<30); err == nil {
		t.Error("no 1 GiB mapping: want an error")
	}
}

func TestRSSOfSelf(t *testing.T) {
	n, err := rss(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if n < 1<<20 {
		t.Errorf("own RSS %d bytes, want > 1 MiB", n)
	}
}
