package store

import "errors"

// Errors returned by the store, wrapped with the object they concern. Test
// for them with errors.Is.
var (
	// ErrNotFound means no record exists for the UID.
	ErrNotFound = errors.New("record not found")

	// ErrLocked means another process holds the file (the agent, when nodectl
	// opens it) and the lock was not released within Options.LockTimeout.
	ErrLocked = errors.New("database file is locked by another process")

	// ErrReadOnly means a write was attempted on a DB opened with
	// Options.ReadOnly.
	ErrReadOnly = errors.New("database is open read-only")

	// ErrVersion means the file's schema, or a record in it, is not the version
	// this binary reads: written by a newer nodevirt, or (read-only opens
	// only) an older file that the agent has not migrated yet.
	ErrVersion = errors.New("unsupported schema or record version")

	// ErrInvalid means a record or event is malformed (for example an empty
	// UID, or an update that changes the UID).
	ErrInvalid = errors.New("invalid record")
)
