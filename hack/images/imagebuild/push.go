package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// runPush pushes archives written by build to another registry: the image
// nodevirt.local/agent:dev becomes REGISTRY/agent:dev.
func runPush(ctx context.Context, log *slog.Logger, args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	registry := fs.String("registry", "", "target registry and optional path, e.g. quay.io/nodevirt (required)")
	insecure := fs.Bool("insecure", false, "allow a plain-HTTP registry")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *registry == "" || fs.NArg() == 0 {
		return errors.New("push: -registry and at least one archive are required")
	}
	for _, file := range fs.Args() {
		if err := push(ctx, log, file, strings.TrimSuffix(*registry, "/"), *insecure); err != nil {
			return err
		}
	}
	return nil
}

func push(ctx context.Context, log *slog.Logger, file, registry string, insecure bool) error {
	dir, err := os.MkdirTemp("", "imagebuild-push-")
	if err != nil {
		return fmt.Errorf("push %q: %w", file, err)
	}
	defer os.RemoveAll(dir)
	if err := extractArchive(file, dir); err != nil {
		return err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return fmt.Errorf("push %q: %w", file, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("push %q: %w", file, err)
	}
	for _, desc := range im.Manifests {
		src, err := name.NewTag(desc.Annotations[annotationImageName])
		if err != nil {
			return fmt.Errorf("push %q: image name: %w", file, err)
		}
		var opts []name.Option
		if insecure {
			opts = append(opts, name.Insecure)
		}
		dst, err := name.NewTag(registry+"/"+repoBase(src)+":"+src.TagStr(), opts...)
		if err != nil {
			return fmt.Errorf("push %q: target name: %w", file, err)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return fmt.Errorf("push %q: %w", file, err)
		}
		if err := remote.Write(dst, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("push %s: %w", dst, err)
		}
		log.Info("pushed", "image", dst.Name(), "digest", desc.Digest)
	}
	return nil
}

// repoBase is the repository path without its registry host.
func repoBase(t name.Tag) string { return t.Context().RepositoryStr() }
