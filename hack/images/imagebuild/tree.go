package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"
)

// maxDepth bounds directory recursion (symlinks are followed).
const maxDepth = 40

// node is one entry of the image file system. Symlinks on the host are
// followed: the image gets the target's content at the link's path, so the
// image needs nothing outside itself.
type node struct {
	Path    string      // image path, absolute and clean
	Src     string      // host file for regular files; "" for directories
	Mode    fs.FileMode // permission bits and type (dir or regular)
	Size    int64
	ModTime time.Time // host mtime of regular files; only part of the fingerprint
	Owner   Owner
}

// tree is the set of image paths; a later entry for the same path wins.
type tree map[string]node

// addEntry adds host path src (a file, or a directory recursively) at dst.
func (t tree) addEntry(src, dst string, owner Owner) error {
	return t.add(src, dst, owner, 0)
}

func (t tree) add(src, dst string, owner Owner, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("add %q: too deep (symlink loop?)", src)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("add %q: %w", src, err)
	}
	switch {
	case fi.IsDir():
		if dst != "/" { // the image root itself has no entry
			// no ModTime: it changes whenever an entry is replaced, and
			// the entries themselves are fingerprinted
			t[dst] = node{Path: dst, Mode: fs.ModeDir | fi.Mode().Perm(), Owner: owner}
		}
		des, err := os.ReadDir(src)
		if err != nil {
			return fmt.Errorf("read dir %q: %w", src, err)
		}
		for _, de := range des {
			child := filepath.Join(src, de.Name())
			if _, err := os.Stat(child); err != nil && de.Type()&fs.ModeSymlink != 0 {
				continue // dangling link: its target's package is not installed
			}
			if err := t.add(child, path.Join(dst, de.Name()), owner, depth+1); err != nil {
				return err
			}
		}
	case fi.Mode().IsRegular():
		t[dst] = node{Path: dst, Src: src, Mode: fi.Mode().Perm(), Size: fi.Size(), ModTime: fi.ModTime(), Owner: owner}
	default:
		return fmt.Errorf("add %q: unsupported file type %v", src, fi.Mode().Type())
	}
	return nil
}

// sorted returns the nodes plus every missing parent directory (root-owned,
// 0755), parents before children.
func (t tree) sorted() []node {
	all := make(map[string]node, len(t))
	for p, n := range t {
		all[p] = n
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; ok {
				continue
			}
			if tn, ok := t[d]; ok {
				all[d] = tn
				continue
			}
			all[d] = node{Path: d, Mode: fs.ModeDir | 0o755}
		}
	}
	out := make([]node, 0, len(all))
	for _, n := range all {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
