package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nodevirt/nodevirt/node/launchspec"
)

// holdDiskCmd keeps a containerDisk image's root reachable through
// /proc/<pid>/root: it writes its pid to --pid-file and sleeps until
// SIGTERM, or until the launcher ended (launchspec.LauncherDoneName next
// to the pid file), so that the pod completes.
func holdDiskCmd(args []string) int {
	fs := flag.NewFlagSet("hold-disk", flag.ContinueOnError)
	pidFile := fs.String("pid-file", "", "where to write this process's pid")
	if err := fs.Parse(args); err != nil || *pidFile == "" {
		fmt.Fprintln(os.Stderr, "usage: nodevirt-launcher hold-disk --pid-file FILE")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := writePID(*pidFile); err != nil {
		fmt.Fprintln(os.Stderr, "hold-disk:", err)
		return 1
	}
	done := filepath.Join(filepath.Dir(*pidFile), launchspec.LauncherDoneName)
	tick := time.NewTicker(holderPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-tick.C:
			if _, err := os.Stat(done); err == nil {
				return 0
			}
		}
	}
}

// holderPoll is how often a holder looks for the launcher's end marker.
const holderPoll = time.Second

func writePID(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
