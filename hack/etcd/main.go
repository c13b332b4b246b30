// Command etcd runs a single-member etcd 3.5 server for tests and the local
// cluster. It listens only on the URLs it is given (loopback by default) and
// stops cleanly on SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "directory for etcd's data (required)")
	clientURL := flag.String("listen-client-url", "http://127.0.0.1:2379", "client URL to listen on and advertise")
	peerURL := flag.String("listen-peer-url", "http://127.0.0.1:2380", "peer URL to listen on and advertise")
	noFsync := flag.Bool("unsafe-no-fsync", false, "skip fsync: for throwaway test data only")
	flag.Parse()
	if err := run(*dataDir, *clientURL, *peerURL, *noFsync); err != nil {
		slog.Error("etcd", "err", err)
		os.Exit(1)
	}
}

func run(dataDir, clientURL, peerURL string, noFsync bool) error {
	if dataDir == "" {
		return fmt.Errorf("-data-dir is required")
	}
	client, err := url.Parse(clientURL)
	if err != nil {
		return fmt.Errorf("parse -listen-client-url: %w", err)
	}
	peer, err := url.Parse(peerURL)
	if err != nil {
		return fmt.Errorf("parse -listen-peer-url: %w", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "nodevirt"
	cfg.Dir = dataDir
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = noFsync
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	defer e.Close()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-e.Server.ReadyNotify():
		slog.Info("etcd ready", "client", clientURL)
	case err := <-e.Err():
		return fmt.Errorf("etcd failed to start: %w", err)
	case <-sig:
		return nil
	}
	select {
	case err := <-e.Err():
		return fmt.Errorf("etcd: %w", err)
	case <-sig:
		return nil
	}
}
