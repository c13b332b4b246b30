package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nodevirt/nodevirt/node/launcher"
	"github.com/nodevirt/nodevirt/node/launchspec"
)

// runCmd serves the launcher API and runs QEMU. Exit status: 0 after a
// guest shutdown (or a SIGTERM before any launch), 1 otherwise.
func runCmd(args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfg := launcher.Config{QEMUOutput: os.Stderr}
	fs.StringVar(&cfg.SocketsDir, "sockets", launchspec.DefaultSocketsDir, "the pod's sockets directory")
	fs.StringVar(&cfg.PrivateDir, "private", launchspec.DefaultPrivateDir, "the pod's private directory")
	fs.StringVar(&cfg.PVCDir, "pvcs", launchspec.DefaultPVCDir, "where the filesystem-mode PVCs are mounted")
	fs.StringVar(&cfg.BlockDir, "block", launchspec.DefaultBlockDir, "where the block-mode PVC devices are")
	fs.StringVar(&cfg.QEMU, "qemu", launcher.DefaultQEMU, "QEMU binary")
	fs.DurationVar(&cfg.Linger, "linger", launcher.DefaultLinger, "how long to keep answering after QEMU exited")
	fs.DurationVar(&cfg.KillWait, "kill-wait", launcher.DefaultKillWait, "time between QMP quit and SIGKILL")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	srv, err := launcher.NewServer(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for sig := range sigs {
			cfg.Logger.Info("signal received", "signal", sig.String(), "at", time.Now())
			srv.Stop()
		}
	}()
	exit, err := srv.Run(context.Background())
	markDone(cfg.SocketsDir, cfg.Logger)
	if err != nil {
		cfg.Logger.Error("launcher failed", "err", err)
		return 1
	}
	if exit == nil {
		return 0 // stopped before any launch
	}
	if exit.Success() {
		return 0
	}
	return 1
}

// markDone writes the launcher's end marker for the containerDisk holders
// (launchspec.LauncherDoneName), which then exit.
func markDone(socketsDir string, log *slog.Logger) {
	p := launchspec.Paths{Sockets: socketsDir}.LauncherDone()
	err := os.MkdirAll(filepath.Dir(p), 0o755)
	if err == nil {
		err = os.WriteFile(p, nil, 0o644)
	}
	if err != nil {
		log.Warn("end marker for the disk holders", "err", err)
	}
}
