package store

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// v2IndexByName is a fabricated v1→v2 migration, as a later version of this
// package might add: it indexes records by namespace/name.
func v2IndexByName() migration {
	return migration{to: 2, name: "index records by namespace/name", fn: indexByName}
}

func indexByName(tx *bolt.Tx) error {
	root := tx.Bucket([]byte(bucketRoot))
	idx, err := root.CreateBucket([]byte("names"))
	if err != nil {
		return err
	}
	return root.Bucket([]byte(bucketRecords)).ForEach(func(k, v []byte) error {
		var r Record
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		return idx.Put([]byte(r.Namespace+"/"+r.Name), k)
	})
}

// rawUpdate runs fn in a write transaction on the bbolt file at path,
// bypassing the store.
func rawUpdate(t *testing.T, path string, fn func(*bolt.Tx) error) error {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	return bdb.Update(fn)
}

// rawSchema returns the schema version of the file at path.
func rawSchema(t *testing.T, path string) int {
	t.Helper()
	var v int
	err := rawUpdate(t, path, func(tx *bolt.Tx) error {
		var err error
		v, err = readSchema(tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// writeV1 writes a v1 file holding records a (ns/vm-a) and b (ns/vm-b).
func writeV1(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"a", "b"} {
		if err := db.Put(context.Background(), Record{UID: uid, Namespace: "ns", Name: "vm-" + uid}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMigrations_TableIsOrdered(t *testing.T) {
	table := migrations()
	if got := table[len(table)-1].to; got != schemaVersion {
		t.Errorf("last migration targets %d, schemaVersion is %d", got, schemaVersion)
	}
	for i, m := range table {
		if m.to != i+1 || m.name == "" || m.fn == nil {
			t.Errorf("migration %d = {to: %d, name: %q}: want to %d, a name and a func", i, m.to, m.name, i+1)
		}
	}
}

// A v0 file is a bbolt file nodevirt never wrote; Open creates the layout and
// leaves anything else alone.
func TestOpen_MigratesV0File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	err := rawUpdate(t, path, func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("other"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}

	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Put(context.Background(), Record{UID: "a"}); err != nil {
		t.Errorf("Put after migration: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	if got := rawSchema(t, path); got != schemaVersion {
		t.Errorf("schema = %d, want %d", got, schemaVersion)
	}
	err = rawUpdate(t, path, func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("other")).Get([]byte("k")); string(v) != "v" {
			t.Errorf("unrelated bucket changed: k = %q", v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMigrate_FabricatedV1ToV2(t *testing.T) {
	path := writeV1(t)
	if err := rawUpdate(t, path, func(tx *bolt.Tx) error {
		return migrate(tx, append(migrations(), v2IndexByName()))
	}); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if got := rawSchema(t, path); got != 2 {
		t.Errorf("schema = %d, want 2", got)
	}
	index := map[string]string{}
	err := rawUpdate(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bucketRoot)).Bucket([]byte("names")).ForEach(func(k, v []byte) error {
			index[string(k)] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"ns/vm-a": "a", "ns/vm-b": "b"}, index); diff != "" {
		t.Errorf("v2 index (-want +got):\n%s", diff)
	}

	// This binary knows only v1: it must refuse the v2 file, not write it.
	for _, ro := range []bool{false, true} {
		if _, err := Open(path, Options{ReadOnly: ro}); !errors.Is(err, ErrVersion) {
			t.Errorf("Open(ReadOnly=%v) of a v2 file: err = %v, want ErrVersion", ro, err)
		}
	}
	if got := rawSchema(t, path); got != 2 {
		t.Errorf("schema after refused Open = %d, want 2", got)
	}
}

func TestMigrate_FailedStepRollsBack(t *testing.T) {
	path := writeV1(t)
	errBoom := errors.New("boom")
	broken := migration{to: 2, name: "half done", fn: func(tx *bolt.Tx) error {
		if _, err := tx.Bucket([]byte(bucketRoot)).CreateBucket([]byte("half")); err != nil {
			return err
		}
		return errBoom
	}}
	err := rawUpdate(t, path, func(tx *bolt.Tx) error {
		return migrate(tx, append(migrations(), broken))
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("err = %v, want the migration's error", err)
	}
	if got := rawSchema(t, path); got != 1 {
		t.Errorf("schema = %d, want 1", got)
	}
	err = rawUpdate(t, path, func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(bucketRoot)).Bucket([]byte("half")) != nil {
			t.Error("bucket of the failed migration survived")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMigrate_RunsEachStepOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	var ran []int
	step := func(to int) migration {
		return migration{to: to, name: "count", fn: func(tx *bolt.Tx) error {
			ran = append(ran, to)
			return nil
		}}
	}
	table := []migration{migrations()[0], step(2), step(3)}
	for range 2 {
		if err := rawUpdate(t, path, func(tx *bolt.Tx) error { return migrate(tx, table) }); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]int{2, 3}, ran); diff != "" {
		t.Errorf("steps run (-want +got):\n%s", diff)
	}
}

func TestMigrate_RejectsBadTable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	table := []migration{migrations()[0], {to: 3, name: "gap", fn: createV1}}
	if err := rawUpdate(t, path, func(tx *bolt.Tx) error { return migrate(tx, table) }); err == nil {
		t.Error("migrate accepted a table with a gap")
	}
	if got := rawSchema(t, path); got != 0 {
		t.Errorf("schema = %d after a rejected table, want 0", got)
	}
}

func TestGet_NewerRecordVersion(t *testing.T) {
	path := writeV1(t)
	err := rawUpdate(t, path, func(tx *bolt.Tx) error {
		recs := tx.Bucket([]byte(bucketRoot)).Bucket([]byte(bucketRecords))
		return recs.Put([]byte("future"), []byte(`{"version":99,"uid":"future","hologram":true}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.Get(ctx, "future"); !errors.Is(err, ErrVersion) {
		t.Errorf("Get: err = %v, want ErrVersion", err)
	}
	if _, err := db.Get(ctx, "a"); err != nil {
		t.Errorf("Get of a current record: %v", err)
	}
	if err := db.Check(ctx); !errors.Is(err, ErrVersion) {
		t.Errorf("Check: err = %v, want ErrVersion", err)
	}
}
