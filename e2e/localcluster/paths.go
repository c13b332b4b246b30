package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const module = "github.com/nodevirt/nodevirt"

// ErrNoRepo means no parent directory holds nodevirt's go.mod.
var ErrNoRepo = errors.New("nodevirt repository root not found")

// RepoRoot returns the nearest parent of the working directory whose go.mod
// declares the nodevirt module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo root: %w", err)
	}
	for {
		if isRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoRepo
		}
		dir = parent
	}
}

func isRoot(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == module
		}
	}
	return false
}

// OutDir returns where built artifacts live: $NODEVIRT_OUT, else
// <repo root>/_output.
func OutDir() (string, error) {
	if out := os.Getenv("NODEVIRT_OUT"); out != "" {
		return out, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output"), nil
}
