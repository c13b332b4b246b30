package store

import (
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// schemaVersion is the bucket layout this binary reads and writes; see the
// tree in doc.go. It equals the target of the last migration.
const schemaVersion = 1

// Bucket and key names. See doc.go for the tree.
const (
	bucketRoot      = "nodevirt"
	keySchema       = "schema"
	bucketRecords   = "records"
	bucketTimelines = "timelines"
)

// migration moves the file from schema version to-1 to version to.
type migration struct {
	to   int
	name string
	fn   func(tx *bolt.Tx) error
}

// migrations returns the ordered migration table. Adding schema version N is
// appending {to: N, ...} here and bumping schemaVersion.
func migrations() []migration {
	return []migration{
		{to: 1, name: "create root, records and timelines buckets", fn: createV1},
	}
}

// createV1 creates the v1 layout in an empty (v0) file.
func createV1(tx *bolt.Tx) error {
	root, err := tx.CreateBucketIfNotExists([]byte(bucketRoot))
	if err != nil {
		return err
	}
	for _, name := range []string{bucketRecords, bucketTimelines} {
		if _, err := root.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("create bucket %q: %w", name, err)
		}
	}
	return nil
}

// readSchema returns the file's schema version; 0 means a file nodevirt has
// never written.
func readSchema(tx *bolt.Tx) (int, error) {
	root := tx.Bucket([]byte(bucketRoot))
	if root == nil {
		return 0, nil
	}
	v := root.Get([]byte(keySchema))
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("schema key is %d bytes, want 8: %w", len(v), ErrVersion)
	}
	return int(binary.BigEndian.Uint64(v)), nil
}

func writeSchema(tx *bolt.Tx, version int) error {
	root, err := tx.CreateBucketIfNotExists([]byte(bucketRoot))
	if err != nil {
		return err
	}
	return root.Put([]byte(keySchema), binary.BigEndian.AppendUint64(nil, uint64(version)))
}

// migrate runs, in order, every migration in table newer than the file's
// version, recording each new version. It runs inside the caller's
// transaction: a failure rolls back every step, leaving the file as it was.
func migrate(tx *bolt.Tx, table []migration) error {
	have, err := readSchema(tx)
	if err != nil {
		return err
	}
	want := 0
	for i, m := range table {
		if m.to != i+1 {
			return fmt.Errorf("migration %d (%s) targets version %d, want %d", i, m.name, m.to, i+1)
		}
		want = m.to
	}
	if have > want {
		return fmt.Errorf("file has schema version %d, this binary knows up to %d: %w", have, want, ErrVersion)
	}
	for _, m := range table[have:] {
		if err := m.fn(tx); err != nil {
			return fmt.Errorf("migrate schema to version %d (%s): %w", m.to, m.name, err)
		}
		if err := writeSchema(tx, m.to); err != nil {
			return fmt.Errorf("record schema version %d: %w", m.to, err)
		}
	}
	return nil
}
