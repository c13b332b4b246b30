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
)

// holdDiskCmd keeps a containerDisk image's root reachable through
// /proc/<pid>/root: it writes its pid to --pid-file and sleeps until
// SIGTERM.
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
	<-ctx.Done()
	return 0
}

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
