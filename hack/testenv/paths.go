package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

const modulePath = "github.com/nodevirt/nodevirt"

// RepoRoot returns the root of the nodevirt checkout containing the working
// directory, found by walking up to the go.mod that declares the module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no nodevirt go.mod above the working directory")
		}
		dir = parent
	}
}

// OutDir returns the build output directory: $NODEVIRT_OUT, or <repo>/_output.
func OutDir() (string, error) {
	if d := os.Getenv("NODEVIRT_OUT"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "_output"), nil
}
