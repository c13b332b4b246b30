// Command kubectl-nodevirt is a kubectl plugin: with it on PATH,
// `kubectl nodevirt console-ui` serves nodevirt's console page on this
// machine, acting with the user's own kubeconfig (see cluster/consoleui).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/nodevirt/nodevirt/cluster/consoleui"
)

const usage = `Usage: kubectl nodevirt console-ui [flags]

Serves a console for nodevirt VMs on 127.0.0.1: the VMs of a namespace,
their serial terminal and VNC screen, guest-agent data and events. Every
request goes to the API server with your kubeconfig's credentials.
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl-nodevirt:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "console-ui" {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("want the subcommand console-ui")
	}
	fs := pflag.NewFlagSet("console-ui", pflag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage, "\nFlags:\n", fs.FlagUsages()) }
	var kf consoleui.KubeFlags
	fs.StringVar(&kf.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&kf.Context, "context", "", "kubeconfig context to use")
	fs.StringVarP(&kf.Namespace, "namespace", "n", "", "namespace the page opens with (default: the context's)")
	address := fs.String("address", "127.0.0.1", "loopback IP to listen on")
	port := fs.Int("port", 0, "port to listen on (0: a free one)")
	open := fs.Bool("open", false, "open the URL in the desktop's browser")
	verbose := fs.BoolP("verbose", "v", false, "log proxy errors to stderr")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	kube, err := consoleui.LoadKube(kf)
	if err != nil {
		return err
	}
	level := slog.LevelError
	if *verbose {
		level = slog.LevelInfo
	}
	srv, err := consoleui.Listen(consoleui.Config{
		Kube: kube, Address: *address, Port: *port, Open: *open, Out: os.Stdout,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return srv.Serve(ctx)
}
