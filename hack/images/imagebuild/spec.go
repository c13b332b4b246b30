package main

import (
	"errors"
	"flag"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Spec describes one image: where its files come from and how it runs.
type Spec struct {
	Ref        string   // full reference, e.g. nodevirt.local/probe:dev
	Out        string   // archive path
	Entrypoint []string // image entrypoint
	Cmd        []string // image default arguments
	Env        []string // KEY=VALUE, after the default PATH
	User       string   // user the container runs as
	Owner      *Owner   // owner of the listed entries; nil means root
	Libs       bool     // add the shared-library closure of ELF files
	Entries    []Entry  // host sources and their image paths
}

// Owner is a numeric uid:gid.
type Owner struct{ UID, GID int }

// Entry copies host path Src (file or directory tree) to image path Dst.
type Entry struct{ Src, Dst string }

// listFlag collects repeated string flags.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// parseSpec reads the build command line.
func parseSpec(args []string) (Spec, error) {
	var s Spec
	var env listFlag
	var entrypoint, cmd, owner string
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.StringVar(&s.Ref, "ref", "", "image reference (required)")
	fs.StringVar(&s.Out, "out", "", "output archive (required)")
	fs.StringVar(&entrypoint, "entrypoint", "", "comma-separated entrypoint")
	fs.StringVar(&cmd, "cmd", "", "comma-separated default arguments")
	fs.Var(&env, "env", "KEY=VALUE environment entry (repeatable)")
	fs.StringVar(&s.User, "user", "", "user the container runs as")
	fs.StringVar(&owner, "owner", "", "uid:gid owning the listed entries (default root)")
	fs.BoolVar(&s.Libs, "libs", false, "add the shared-library closure (ldd) of every ELF entry")
	if err := fs.Parse(args); err != nil {
		return Spec{}, err
	}
	if s.Ref == "" || s.Out == "" {
		return Spec{}, errors.New("build: -ref and -out are required")
	}
	s.Entrypoint, s.Cmd, s.Env = splitList(entrypoint), splitList(cmd), env
	if owner != "" {
		o, err := parseOwner(owner)
		if err != nil {
			return Spec{}, err
		}
		s.Owner = &o
	}
	for _, a := range fs.Args() {
		e, err := parseEntry(a)
		if err != nil {
			return Spec{}, err
		}
		s.Entries = append(s.Entries, e)
	}
	return s, nil
}

func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// parseEntry parses SRC=DST; DST must be absolute.
func parseEntry(a string) (Entry, error) {
	src, dst, ok := strings.Cut(a, "=")
	if !ok || src == "" || !path.IsAbs(dst) {
		return Entry{}, fmt.Errorf("entry %q: want SRC=/ABSOLUTE/DST", a)
	}
	return Entry{Src: src, Dst: path.Clean(dst)}, nil
}

// parseOwner parses uid:gid.
func parseOwner(v string) (Owner, error) {
	u, g, ok := strings.Cut(v, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid < 0 || gid < 0 {
		return Owner{}, fmt.Errorf("owner %q: want UID:GID", v)
	}
	return Owner{UID: uid, GID: gid}, nil
}
