package main

import (
	"context"
	"io"
	stdlog "log"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestPush_RenamesToRegistry pushes a built archive to an in-process
// registry and reads it back under the new name.
func TestPush_RenamesToRegistry(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(stdlog.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "agent")
	mustWrite(t, src, "binary", 0o755)
	out := filepath.Join(t.TempDir(), "agent.tar")
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	if err := runBuild(ctx, log, []string{"-ref", "nodevirt.local/agent:dev", "-out", out, src + "=/usr/bin/agent"}); err != nil {
		t.Fatal(err)
	}
	if err := runPush(ctx, log, []string{"-registry", u.Host + "/nodevirt", "-insecure", out}); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(u.Host+"/nodevirt/agent:dev", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	got, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(out + ".digest")
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != strings.TrimSpace(string(want)) {
		t.Errorf("pushed digest %s, built %s", got, want)
	}
}
