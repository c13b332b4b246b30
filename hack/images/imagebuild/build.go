package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epochUnix (2026-01-01) is the time of every archive entry and of the
// image config: the same inputs always give the same digest.
const epochUnix = 1767225600

func epoch() time.Time { return time.Unix(epochUnix, 0).UTC() }

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func runBuild(ctx context.Context, log *slog.Logger, args []string) error {
	s, err := parseSpec(args)
	if err != nil {
		return err
	}
	t, err := collect(ctx, s)
	if err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	nodes := t.sorted()
	fp, err := fingerprint(s, nodes)
	if err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	if old, err := os.ReadFile(s.Out + ".stamp"); err == nil && string(old) == fp {
		if _, err := os.Stat(s.Out); err == nil {
			log.Info("image up to date", "ref", s.Ref, "out", s.Out)
			return nil
		}
	}
	start := time.Now()
	digest, err := build(s, nodes)
	if err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	if err := os.WriteFile(s.Out+".digest", []byte(digest.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	if err := os.WriteFile(s.Out+".ref", []byte(s.Ref+"\n"), 0o644); err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	if err := os.WriteFile(s.Out+".stamp", []byte(fp), 0o644); err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	log.Info("image built", "ref", s.Ref, "out", s.Out, "digest", digest, "files", len(nodes),
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// collect gathers the image's files.
func collect(ctx context.Context, s Spec) (tree, error) {
	t := tree{}
	owner := Owner{}
	if s.Owner != nil {
		owner = *s.Owner
	}
	for _, e := range s.Entries {
		if err := t.addEntry(e.Src, e.Dst, owner); err != nil {
			return nil, err
		}
	}
	if s.Libs {
		if err := t.addLibs(ctx); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// fingerprint hashes everything the archive depends on, cheaply: file
// metadata rather than content.
func fingerprint(s Spec, nodes []node) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	// A new imagebuild may lay out the same inputs differently.
	if self, err := os.Executable(); err == nil {
		if fi, err := os.Stat(self); err == nil {
			fmt.Fprintf(h, "%d %d\n", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	if err := enc.Encode(s); err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	for _, n := range nodes {
		if err := enc.Encode(n); err != nil {
			return "", fmt.Errorf("fingerprint: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)) + "\n", nil
}

// build writes the archive and returns the image's manifest digest.
func build(s Spec, nodes []node) (v1.Hash, error) {
	layerFile := s.Out + ".layer.tmp"
	defer os.Remove(layerFile)
	if err := writeLayer(layerFile, nodes); err != nil {
		return v1.Hash{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(layerFile) },
		tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return v1.Hash{}, fmt.Errorf("layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch()}, CreatedBy: "nodevirt imagebuild",
	}})
	if err != nil {
		return v1.Hash{}, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", "amd64", v1.Time{Time: epoch()}
	cf.Config.Env = append([]string{defaultPath}, s.Env...)
	cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.User = s.Entrypoint, s.Cmd, s.User
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return v1.Hash{}, fmt.Errorf("config: %w", err)
	}
	if err := writeArchive(s.Out, s.Ref, img); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}

// writeLayer writes the uncompressed layer tarball.
func writeLayer(file string, nodes []node) (err error) {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("create layer %q: %w", file, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close layer %q: %w", file, cerr)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	for _, n := range nodes {
		if err := writeNode(tw, n); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write layer %q: %w", file, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write layer %q: %w", file, err)
	}
	return nil
}

func writeNode(tw *tar.Writer, n node) error {
	h := &tar.Header{
		Name:    strings.TrimPrefix(n.Path, "/"),
		Mode:    int64(n.Mode.Perm()),
		Uid:     n.Owner.UID,
		Gid:     n.Owner.GID,
		ModTime: epoch(),
		Format:  tar.FormatPAX,
	}
	if n.Mode.IsDir() {
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("write %q: %w", n.Path, err)
		}
		return nil
	}
	h.Typeflag, h.Size = tar.TypeReg, n.Size
	if err := tw.WriteHeader(h); err != nil {
		return fmt.Errorf("write %q: %w", n.Path, err)
	}
	f, err := os.Open(n.Src)
	if err != nil {
		return fmt.Errorf("open %q: %w", n.Src, err)
	}
	defer f.Close()
	if _, err := io.CopyN(tw, f, n.Size); err != nil {
		return fmt.Errorf("copy %q: %w", n.Src, err)
	}
	return nil
}
