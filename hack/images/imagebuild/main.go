// Command imagebuild assembles single-layer OCI images from host files
// without docker, and pushes such images to a registry.
//
//	imagebuild build -ref nodevirt.local/probe:dev -out probe.tar [-entrypoint /probe] SRC=DST...
//	imagebuild push -registry HOST[:PORT][/PATH] [-insecure] ARCHIVE...
//
// build writes an OCI image archive (oci-layout, index.json, blobs/) that
// `ctr images import` and registries accept, plus ARCHIVE.digest (the manifest
// digest) and ARCHIVE.stamp (a fingerprint of the inputs: an unchanged input
// set skips the build). Archives are reproducible: entries are sorted, owned by
// root unless -owner says otherwise, and carry a fixed modification time.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: imagebuild build|push [flags] ...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var err error
	switch os.Args[1] {
	case "build":
		err = runBuild(ctx, log, os.Args[2:])
	case "push":
		err = runPush(ctx, log, os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}
