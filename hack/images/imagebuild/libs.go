package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// isELF reports whether the file at p starts with the ELF magic.
func isELF(p string) (bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return false, fmt.Errorf("open %q: %w", p, err)
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil {
		return false, nil // shorter than the magic: not ELF
	}
	return bytes.Equal(magic, []byte("\x7fELF")), nil
}

// sharedLibs returns the host paths of the shared libraries (and the dynamic
// loader) that the ELF file p needs, as ldd resolves them. A static binary has
// none.
func sharedLibs(ctx context.Context, p string) ([]string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ldd", p)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if out := stdout.String() + stderr.String(); strings.Contains(out, "not a dynamic executable") ||
		strings.Contains(out, "statically linked") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ldd %q: %w: %s", p, err, stderr.String())
	}
	libs, err := parseLdd(stdout.String())
	if err != nil {
		return nil, fmt.Errorf("ldd %q: %w", p, err)
	}
	return libs, nil
}

// parseLdd extracts library paths from ldd output. The vDSO has no file and
// is skipped; an unresolved library is an error.
func parseLdd(out string) ([]string, error) {
	var libs []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		name, target, arrow := strings.Cut(line, "=>")
		if arrow {
			target = strings.TrimSpace(target)
			if strings.HasPrefix(target, "not found") {
				return nil, fmt.Errorf("library %s not found", strings.TrimSpace(name))
			}
			line = target
		}
		p, _, _ := strings.Cut(line, " (")
		if strings.HasPrefix(p, "/") {
			libs = append(libs, p)
		}
	}
	if len(libs) == 0 {
		return nil, errors.New("no libraries in ldd output")
	}
	return libs, nil
}

// addLibs adds the shared-library closure of every ELF regular file in t, at
// the paths ldd reports (which is where the loader looks for them).
func (t tree) addLibs(ctx context.Context) error {
	var elves []string
	for _, n := range t {
		if n.Src == "" {
			continue
		}
		ok, err := isELF(n.Src)
		if err != nil {
			return err
		}
		if ok {
			elves = append(elves, n.Src)
		}
	}
	for _, e := range elves {
		libs, err := sharedLibs(ctx, e)
		if err != nil {
			return err
		}
		for _, l := range libs {
			if _, ok := t[l]; ok {
				continue
			}
			if err := t.addEntry(l, l, Owner{}); err != nil {
				return err
			}
		}
	}
	return nil
}
