package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/nodevirt/nodevirt/node/metrics"
)

// rss is the resident set size of pid in bytes.
func rss(pid int) (int64, error) { return metrics.ProcessRSS("/proc", pid) }

// guestRAMResident is how much of the guest's RAM QEMU pid has touched:
// the Rss of its anonymous mapping of the guest memory size.
func guestRAMResident(pid int, guestBytes int64) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := parseGuestRAM(f, guestBytes)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/smaps: %w", pid, err)
	}
	return n, nil
}

// parseGuestRAM reads smaps and returns the Rss (bytes) of the anonymous
// mapping whose size is the guest's memory, give or take the 2 MiB QEMU
// may align it to.
func parseGuestRAM(r io.Reader, guestBytes int64) (int64, error) {
	const slack = 4 << 20
	sc := bufio.NewScanner(r)
	inGuest, found := false, false
	var rssKB int64
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			inGuest = false
			if found {
				continue // the first match wins
			}
			lo, hi, ok := strings.Cut(fields[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil {
				continue
			}
			size := int64(end - start)
			anon := fields[4] == "0" && (len(fields) == 5 || !strings.HasPrefix(fields[5], "/"))
			if anon && size >= guestBytes && size <= guestBytes+slack {
				inGuest, found = true, true
			}
			continue
		}
		if inGuest && len(fields) >= 2 && fields[0] == "Rss:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("smaps line %q: %w", line, err)
			}
			rssKB = kb
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no anonymous mapping of %d bytes (the guest RAM)", guestBytes)
	}
	return rssKB << 10, nil
}
