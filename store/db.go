package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Defaults for zero Options fields.
const (
	DefaultLockTimeout   = time.Second
	DefaultTimelineLimit = 200
	DefaultRetention     = 24 * time.Hour
)

// Options configure Open. The zero value is a writable store with the
// defaults above.
type Options struct {
	// ReadOnly opens the file with a shared lock and refuses writes. It is
	// for nodectl's post-mortem view: it never creates or migrates the file.
	ReadOnly bool

	// LockTimeout bounds the wait for the file lock. The agent holds an
	// exclusive lock for as long as it runs, so a read-only open while the
	// agent is up fails with ErrLocked after this long instead of hanging.
	LockTimeout time.Duration

	// TimelineLimit is how many events each record's timeline keeps; older
	// events are dropped as new ones arrive.
	TimelineLimit int

	// Retention is how long a record marked gone is kept before Prune
	// removes it.
	Retention time.Duration
}

func (o Options) withDefaults() Options {
	if o.LockTimeout <= 0 {
		o.LockTimeout = DefaultLockTimeout
	}
	if o.TimelineLimit <= 0 {
		o.TimelineLimit = DefaultTimelineLimit
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	return o
}

// DB is an open store file. It is safe for concurrent use; writes are
// serialized by bbolt, one transaction at a time.
type DB struct {
	bolt *bolt.DB
	opts Options
	ix   *index     // by name (index.go)
	log  *intentLog // pause intents not yet in the bbolt file (intentlog.go)
}

// Open opens the store file at path. A writable open creates the file (and
// its directory) if needed and migrates it to the current schema; a
// read-only open requires a file already at the current schema.
func Open(path string, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	if !opts.ReadOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("open store %q: %w", path, err)
		}
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:  opts.LockTimeout,
		ReadOnly: opts.ReadOnly,
		// NoSync stays false: every commit is fsynced before it returns.
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %q: no lock after %v: %w", path, opts.LockTimeout, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", path, err)
	}
	if opts.ReadOnly {
		err = bdb.View(checkSchema)
	} else {
		err = bdb.Update(func(tx *bolt.Tx) error { return migrate(tx, migrations()) })
	}
	var ix *index
	if err == nil {
		err = bdb.View(func(tx *bolt.Tx) error {
			var err error
			ix, err = indexOf(tx)
			return err
		})
	}
	var db *DB
	if err == nil {
		db, err = openIntents(&DB{bolt: bdb, opts: opts, ix: ix}, path+intentLogSuffix)
	}
	if err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("open store %q: %w", path, err)
	}
	return db, nil
}

// openIntents opens the intent log of db. A writable store replays into
// the bbolt file the entries its records do not reflect (a crash came
// between an intent's sync and its fold), then folds new entries as they
// come; a read-only one shows them over the records it reads.
func openIntents(db *DB, path string) (*DB, error) {
	l, entries, err := openIntentLog(path, db.opts.ReadOnly, db.ix.maxIntentSeq())
	if err != nil {
		return nil, err
	}
	db.log = l
	for _, e := range entries {
		l.pending[e.UID] = append(l.pending[e.UID], e)
	}
	if db.opts.ReadOnly {
		return db, nil
	}
	if err := db.foldIntents(); err != nil {
		l.f.Close()
		return nil, fmt.Errorf("replay intent log: %w", err)
	}
	l.startFolding(db)
	return db, nil
}

// indexOf builds the name index of the records in tx.
func indexOf(tx *bolt.Tx) (*index, error) {
	b, err := bucketsOf(tx)
	if err != nil {
		return nil, err
	}
	return buildIndex(b.records)
}

// checkSchema fails unless the file is at exactly the current schema.
func checkSchema(tx *bolt.Tx) error {
	v, err := readSchema(tx)
	if err != nil {
		return err
	}
	if v != schemaVersion {
		return fmt.Errorf("file has schema version %d, want %d: %w", v, schemaVersion, ErrVersion)
	}
	return nil
}

// Close releases the file and its lock.
func (db *DB) Close() error {
	err := db.log.close(db)
	if err := errors.Join(err, db.bolt.Close()); err != nil {
		return fmt.Errorf("close store %q: %w", db.bolt.Path(), err)
	}
	return nil
}

// Path returns the file's path.
func (db *DB) Path() string { return db.bolt.Path() }

// Check verifies the file's page structure (bbolt's consistency check) and
// that every record decodes.
func (db *DB) Check(ctx context.Context) error {
	return db.view(ctx, func(b buckets) error {
		var errs []error
		for err := range b.records.Tx().Check() {
			errs = append(errs, err)
		}
		err := b.records.ForEach(func(k, v []byte) error {
			_, err := decodeRecord(string(k), v)
			return err
		})
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("check store %q: %w", db.bolt.Path(), err)
		}
		return nil
	})
}

// buckets are the v1 buckets, resolved inside one transaction, with the
// name index that a write transaction keeps in step with the records.
type buckets struct {
	records   *bolt.Bucket
	timelines *bolt.Bucket
	ix        *index
	// indexed is set once a write transaction changed the index.
	indexed *bool
	log     *intentLog
	// absorbed are the intent log entries a write transaction applied, to
	// be forgotten once it commits.
	absorbed *[]intent
}

func bucketsOf(tx *bolt.Tx) (buckets, error) {
	root := tx.Bucket([]byte(bucketRoot))
	if root == nil {
		return buckets{}, fmt.Errorf("bucket %q missing: %w", bucketRoot, ErrVersion)
	}
	b := buckets{
		records:   root.Bucket([]byte(bucketRecords)),
		timelines: root.Bucket([]byte(bucketTimelines)),
	}
	if b.records == nil || b.timelines == nil {
		return buckets{}, fmt.Errorf("bucket %q or %q missing: %w", bucketRecords, bucketTimelines, ErrVersion)
	}
	return b, nil
}

// view runs fn in a read transaction. Cancellation is honoured before the
// transaction starts; a running transaction is short and is not interrupted.
func (db *DB) view(ctx context.Context, fn func(buckets) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return db.bolt.View(func(tx *bolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		b.ix, b.log = db.ix, db.log
		return fn(b)
	})
}

// update runs fn in a write transaction, committed (and fsynced) when fn
// returns nil and rolled back otherwise. A transaction that changed the
// name index and did not commit has the index rebuilt from the file.
func (db *DB) update(ctx context.Context, fn func(buckets) error) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	indexed := false
	var absorbed []intent
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b, err := bucketsOf(tx)
		if err != nil {
			return err
		}
		b.ix, b.indexed, b.log, b.absorbed = db.ix, &indexed, db.log, &absorbed
		return fn(b)
	})
	if err != nil && indexed {
		db.rebuildIndex()
	}
	if err == nil {
		db.log.forget(absorbed)
	}
	return err
}

// rebuildIndex replaces the name index with one read from the file. If
// the file cannot be read the index is left as it is: a hint that may name
// records that are not there, which readers skip.
func (db *DB) rebuildIndex() {
	var ix *index
	if err := db.bolt.View(func(tx *bolt.Tx) error {
		var err error
		ix, err = indexOf(tx)
		return err
	}); err == nil {
		db.ix.replace(ix)
	}
}
