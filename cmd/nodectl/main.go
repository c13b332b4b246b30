// Command nodectl is the node's local debug CLI. It talks to the node
// agent's unix socket; with the agent down, list, show and timeline read
// the agent's bbolt file read-only.
//
//	nodectl [--socket PATH] [--db PATH] COMMAND [ARGS]
//
//	list                  every domain on the node (tombstones too)
//	show VMI              one domain's record (JSON)
//	timeline VMI          its lifecycle timeline
//	qmp VMI 'JSON'        one QMP command, e.g. '{"execute":"query-status"}'
//	agent VMI COMMAND     one guest agent command (name, or JSON)
//	console VMI           the serial console (raw terminal; Ctrl-] quits)
//	pause VMI, unpause VMI
//
// VMI is namespace/name or the VMI's UID.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	fs := flag.NewFlagSet("nodectl", flag.ContinueOnError)
	cfg := Config{}
	fs.StringVar(&cfg.Socket, "socket", "/var/lib/nodevirt/agent.sock", "the agent's node API socket")
	fs.StringVar(&cfg.DB, "db", "/var/lib/nodevirt/agent.db", "the agent's bbolt file (read when the agent is down)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: nodectl [flags] list|show|timeline|qmp|agent|console|pause|unpause [VMI] [ARG]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg.Stdin, cfg.Stdout, cfg.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := Run(ctx, cfg, fs.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "nodectl:", err)
		os.Exit(1)
	}
}
