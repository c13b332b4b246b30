package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// TestBuild_ReproducibleArchive builds the same inputs twice and checks the
// archive's index, its files (with implicit parents and ownership) and that
// both builds produce the same digest.
func TestBuild_ReproducibleArchive(t *testing.T) {
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "disk.qcow2"), "disk", 0o644)
	mustWrite(t, filepath.Join(src, "tree", "a"), "a", 0o755)
	mustWrite(t, filepath.Join(src, "tree", "sub", "b"), "b", 0o600)
	if err := os.Symlink("a", filepath.Join(src, "tree", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(src, "tree", "dangling")); err != nil {
		t.Fatal(err)
	}

	var digests []string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "img.tar")
		args := []string{"-ref", "nodevirt.local/test:dev", "-out", out, "-owner", "107:107", "-entrypoint", "/x,y",
			filepath.Join(src, "disk.qcow2") + "=/disk/disk.qcow2", filepath.Join(src, "tree") + "=/opt/tree"}
		if err := runBuild(context.Background(), slog.New(slog.DiscardHandler), args); err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		d, err := os.ReadFile(out + ".digest")
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, string(d))
		if i > 0 {
			continue
		}
		img, idx := readArchive(t, out)
		if got := idx.Manifests[0].Annotations[annotationImageName]; got != "nodevirt.local/test:dev" {
			t.Errorf("image name annotation = %q", got)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"/x", "y"}, cf.Config.Entrypoint); diff != "" {
			t.Errorf("entrypoint (-want +got):\n%s", diff)
		}
		want := []string{
			"disk/ 0:0 755", "disk/disk.qcow2 107:107 644 disk",
			"opt/ 0:0 755", "opt/tree/ 107:107 755", "opt/tree/a 107:107 755 a", "opt/tree/link 107:107 755 a",
			"opt/tree/sub/ 107:107 755", "opt/tree/sub/b 107:107 600 b",
		}
		if diff := cmp.Diff(want, layerFiles(t, img)); diff != "" {
			t.Errorf("layer files (-want +got):\n%s", diff)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("digests differ between identical builds: %q vs %q", digests[0], digests[1])
	}
}

func mustWrite(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func readArchive(t *testing.T, file string) (v1.Image, *v1.IndexManifest) {
	t.Helper()
	dir := t.TempDir()
	if err := extractArchive(file, dir); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(im)
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1: %s", len(im.Manifests), raw)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img, im
}

// layerFiles lists "name uid:gid mode [content]" for the image's one layer.
func layerFiles(t *testing.T, img v1.Image) []string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		f := h.Name + " " + itoa(h.Uid) + ":" + itoa(h.Gid) + " " + octal(h.Mode)
		if len(body) > 0 {
			f += " " + string(body)
		}
		files = append(files, f)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func octal(m int64) string { return strconv.FormatInt(m, 8) }
