package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nodevirt/nodevirt/node/api"
	"github.com/nodevirt/nodevirt/store"
)

// Config is nodectl's configuration and I/O.
type Config struct {
	Socket string
	DB     string
	Stdin  *os.File
	Stdout io.Writer
	Stderr io.Writer
}

// errUsage marks a command line nodectl does not understand.
var errUsage = errors.New("usage: nodectl list|show VMI|timeline VMI|qmp VMI JSON|agent VMI COMMAND|console VMI|pause VMI|unpause VMI")

// Run runs one nodectl command.
func Run(ctx context.Context, cfg Config, args []string) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	want := map[string]int{"list": 0, "show": 1, "timeline": 1, "qmp": 2, "agent": 2, "console": 1, "pause": 1, "unpause": 1}
	n, ok := want[cmd]
	if !ok || len(rest) != n {
		return errUsage
	}
	c := api.NewClient(cfg.Socket)
	switch cmd {
	case "list", "show", "timeline":
		return readCommand(ctx, cfg, c, cmd, rest)
	case "qmp", "agent":
		return passthrough(ctx, cfg, c, cmd, rest[0], rest[1])
	case "pause":
		return c.Pause(ctx, rest[0])
	case "unpause":
		return c.Unpause(ctx, rest[0])
	default:
		return console(ctx, cfg, c, rest[0])
	}
}

// records is what the read commands need: the agent's API, or the store.
type records interface {
	Domains(ctx context.Context) ([]store.Record, error)
	Domain(ctx context.Context, vmi string) (store.Record, error)
	Timeline(ctx context.Context, vmi string) ([]store.Event, error)
}

// readCommand runs list, show or timeline against the agent, or against
// the bbolt file read-only when the agent does not answer.
func readCommand(ctx context.Context, cfg Config, c *api.Client, cmd string, rest []string) error {
	var src records = c
	if _, err := c.Domains(ctx); agentDown(err) {
		db, err := store.Open(cfg.DB, store.Options{ReadOnly: true, LockTimeout: time.Second})
		if err != nil {
			return fmt.Errorf("the agent is not running and its store cannot be read: %w", err)
		}
		defer db.Close()
		fmt.Fprintf(cfg.Stderr, "nodectl: the agent is not running; reading %s read-only\n", cfg.DB)
		src = offline{db}
	}
	switch cmd {
	case "list":
		recs, err := src.Domains(ctx)
		if err != nil {
			return err
		}
		return printList(cfg.Stdout, recs)
	case "show":
		rec, err := src.Domain(ctx, rest[0])
		if err != nil {
			return err
		}
		return printJSON(cfg.Stdout, rec)
	default:
		evs, err := src.Timeline(ctx, rest[0])
		if err != nil {
			return err
		}
		for _, e := range evs {
			fmt.Fprintf(cfg.Stdout, "%s  %4d  %-20s %s\n", e.Time.UTC().Format(time.RFC3339Nano), e.Seq, e.Reason, e.Message)
		}
		return nil
	}
}

// agentDown reports whether err means nothing listens on the socket.
func agentDown(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// offline answers the read commands from the store.
type offline struct{ db *store.DB }

func (o offline) Domains(ctx context.Context) ([]store.Record, error) { return o.db.List(ctx) }

func (o offline) Domain(ctx context.Context, vmi string) (store.Record, error) {
	return api.Resolve(ctx, o.db, vmi)
}

func (o offline) Timeline(ctx context.Context, vmi string) ([]store.Event, error) {
	r, err := api.Resolve(ctx, o.db, vmi)
	if err != nil {
		return nil, err
	}
	return o.db.Timeline(ctx, r.UID)
}

func printList(w io.Writer, recs []store.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tUID\tPHASE\tPAUSED\tPID\tGONE")
	for _, r := range recs {
		gone := ""
		if r.IsGone() {
			gone = r.Gone.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%d\t%s\n", r.Namespace, r.Name, r.UID, r.Observed.Phase, r.Intent.Paused, r.Process.PID, gone)
	}
	return tw.Flush()
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// passthrough runs qmp VMI JSON or agent VMI COMMAND (a bare command name
// or a JSON command).
func passthrough(ctx context.Context, cfg Config, c *api.Client, kind, vmi, arg string) error {
	var cmd api.Command
	if strings.HasPrefix(strings.TrimSpace(arg), "{") {
		if err := json.Unmarshal([]byte(arg), &cmd); err != nil {
			return fmt.Errorf("command %q: %w", arg, err)
		}
	} else {
		cmd.Execute = arg
	}
	run := c.QMP
	if kind == "agent" {
		run = c.Agent
	}
	res, err := run(ctx, vmi, cmd)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(res, &v); err != nil {
		return err
	}
	return printJSON(cfg.Stdout, v)
}
