package store_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/nodevirt/nodevirt/store"
)

func TestOpen_CreatesDirAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "var", "lib", "nodevirt", "agent.db")
	db := reopen(t, path, store.Options{})
	if db.Path() != path {
		t.Errorf("Path() = %q, want %q", db.Path(), path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode = %v, want 0600", got)
	}
	if err := db.Check(context.Background()); err != nil {
		t.Errorf("Check: %v", err)
	}
}

func TestOpen_ReopenKeepsRecords(t *testing.T) {
	db, path := openTest(t, store.Options{})
	mustPut(t, db, fullRecord("a"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = reopen(t, path, store.Options{})
	if _, err := db.Get(context.Background(), "a"); err != nil {
		t.Errorf("Get after reopen: %v", err)
	}
}

func TestOpen_ReadOnly(t *testing.T) {
	ctx := context.Background()
	db, path := openTest(t, store.Options{})
	mustPut(t, db, fullRecord("a"), ev(0, "Created"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ro := reopen(t, path, store.Options{ReadOnly: true})
	ro2 := reopen(t, path, store.Options{ReadOnly: true}) // shared locks coexist
	for _, db := range []*store.DB{ro, ro2} {
		if _, err := db.Get(ctx, "a"); err != nil {
			t.Errorf("Get: %v", err)
		}
		if evs, err := db.Timeline(ctx, "a"); err != nil || len(evs) != 1 {
			t.Errorf("Timeline = %v, %v; want 1 event", evs, err)
		}
	}

	writes := map[string]func() error{
		"Put":         func() error { return ro.Put(ctx, fullRecord("b")) },
		"Update":      func() error { _, err := ro.Update(ctx, "a", func(*store.Record) error { return nil }); return err },
		"AppendEvent": func() error { return ro.AppendEvent(ctx, "a", ev(1, "X")) },
		"MarkGone":    func() error { _, err := ro.MarkGone(ctx, "a", t0); return err },
		"Delete":      func() error { return ro.Delete(ctx, "a") },
		"Prune":       func() error { _, err := ro.Prune(ctx, t0); return err },
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, store.ErrReadOnly) {
			t.Errorf("%s on read-only DB: err = %v, want ErrReadOnly", name, err)
		}
	}
}

func TestOpen_ReadOnlyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	_, err := store.Open(path, store.Options{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v, want fs.ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only Open created the file (stat err %v)", err)
	}
}

// The agent holds the file's lock while it runs; nodectl must fail fast.
func TestOpen_WhileWriterHoldsLock(t *testing.T) {
	_, path := openTest(t, store.Options{})
	const timeout = 100 * time.Millisecond
	for _, readOnly := range []bool{true, false} {
		start := time.Now()
		db, err := store.Open(path, store.Options{ReadOnly: readOnly, LockTimeout: timeout})
		took := time.Since(start)
		if err == nil {
			_ = db.Close()
		}
		if !errors.Is(err, store.ErrLocked) {
			t.Errorf("ReadOnly=%v: err = %v, want ErrLocked", readOnly, err)
		}
		if took > 10*timeout {
			t.Errorf("ReadOnly=%v: Open took %v with LockTimeout %v", readOnly, took, timeout)
		}
		t.Logf("ReadOnly=%v: ErrLocked after %v", readOnly, took)
	}
}

func TestOpen_ReadOnlyRefusesUnmigratedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	bdb, err := bolt.Open(path, 0o600, nil) // a v0 file: bbolt, but never ours
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(path, store.Options{ReadOnly: true}); !errors.Is(err, store.ErrVersion) {
		t.Errorf("err = %v, want ErrVersion", err)
	}
}

func TestMethods_HonourCancelledContext(t *testing.T) {
	db, _ := openTest(t, store.Options{})
	mustPut(t, db, fullRecord("a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func() error{
		"Get":      func() error { _, err := db.Get(ctx, "a"); return err },
		"List":     func() error { _, err := db.List(ctx); return err },
		"Put":      func() error { return db.Put(ctx, fullRecord("b")) },
		"Update":   func() error { _, err := db.Update(ctx, "a", func(*store.Record) error { return nil }); return err },
		"Timeline": func() error { _, err := db.Timeline(ctx, "a"); return err },
		"Prune":    func() error { _, err := db.Prune(ctx, t0); return err },
		"Check":    func() error { return db.Check(ctx) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: err = %v, want context.Canceled", name, err)
		}
	}
}
