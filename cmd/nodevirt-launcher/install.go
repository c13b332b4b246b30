package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// installCmd copies this binary to DEST (the nodevirt-bin emptyDir).
func installCmd(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: nodevirt-launcher install DEST")
		return 2
	}
	self, err := os.Executable()
	if err == nil {
		err = copyFile(self, args[0], 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "install:", err)
		return 1
	}
	return 0
}

// copyCmd copies files out of an image (kernelBoot):
// copy --to DIR SRC=NAME... writes DIR/NAME from SRC.
func copyCmd(args []string) int {
	fs := flag.NewFlagSet("copy", flag.ContinueOnError)
	to := fs.String("to", "", "destination directory")
	if err := fs.Parse(args); err != nil || *to == "" || fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: nodevirt-launcher copy --to DIR SRC=NAME...")
		return 2
	}
	if err := os.MkdirAll(*to, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "copy:", err)
		return 1
	}
	for _, a := range fs.Args() {
		i := strings.LastIndex(a, "=")
		if i <= 0 || i == len(a)-1 || strings.Contains(a[i+1:], "/") {
			fmt.Fprintf(os.Stderr, "copy: %q is not SRC=NAME\n", a)
			return 2
		}
		if err := copyFile(a[:i], filepath.Join(*to, a[i+1:]), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "copy:", err)
			return 1
		}
	}
	return 0
}

// copyFile copies src to dst atomically (temporary file + rename).
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}
