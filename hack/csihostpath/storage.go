package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Names of the files in a volume's or snapshot's directory.
const (
	volumeMeta   = "volume.json"
	snapshotMeta = "snapshot.json"
	dataDir      = "data"     // Filesystem mode
	diskFile     = "disk.img" // Block mode
)

// volume is a volume's record (volumes/<id>/volume.json).
type volume struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Capacity int64  `json:"capacityBytes"`
	Block    bool   `json:"block"`
	// Source is "snapshot:<id>" or "volume:<id>" when made from one.
	Source string `json:"source,omitempty"`
	// RefuseSnapshots makes every snapshot of the volume fail (its
	// StorageClass has parameter refuseSnapshots "true"): tests use it to
	// see a failed CSI snapshot.
	RefuseSnapshots bool `json:"refuseSnapshots,omitempty"`
}

// snapshot is a snapshot's record (snapshots/<id>/snapshot.json).
type snapshot struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	VolumeID string    `json:"sourceVolumeId"`
	Size     int64     `json:"sizeBytes"`
	Block    bool      `json:"block"`
	Created  time.Time `json:"created"`
}

// store is the driver's state under root.
type store struct{ root string }

// idOf derives a stable ID from a create request's name (CSI creates are
// idempotent by name): prefix and the first 16 bytes of its SHA-256.
func idOf(prefix, name string) string {
	sum := sha256.Sum256([]byte(name))
	return prefix + "-" + hex.EncodeToString(sum[:16])
}

func (s store) volumeDir(id string) string   { return filepath.Join(s.root, "volumes", id) }
func (s store) snapshotDir(id string) string { return filepath.Join(s.root, "snapshots", id) }

// dataPath is where a volume's or snapshot's content lives in dir.
func dataPath(dir string, block bool) string {
	if block {
		return filepath.Join(dir, diskFile)
	}
	return filepath.Join(dir, dataDir)
}

// errNotFound: no such volume or snapshot.
var errNotFound = errors.New("not found")

func (s store) volume(id string) (volume, error) {
	var v volume
	return v, readJSON(filepath.Join(s.volumeDir(id), volumeMeta), &v)
}

func (s store) snapshot(id string) (snapshot, error) {
	var sn snapshot
	return sn, readJSON(filepath.Join(s.snapshotDir(id), snapshotMeta), &sn)
}

// snapshots lists every snapshot record.
func (s store) snapshots() ([]snapshot, error) {
	entries, err := os.ReadDir(filepath.Join(s.root, "snapshots"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []snapshot
	for _, e := range entries {
		sn, err := s.snapshot(e.Name())
		if errors.Is(err, errNotFound) {
			continue // being made or removed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sn)
	}
	return out, nil
}

// createVolume makes v's directory and content, filled by fill (nil: empty),
// and writes its record last: a volume without a record is incomplete and
// is made again from scratch.
func (s store) createVolume(v volume, fill func(dst string) error) error {
	dir := s.volumeDir(v.ID)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dst := dataPath(dir, v.Block)
	switch {
	case fill != nil:
		if err := fill(dst); err != nil {
			return err
		}
		if v.Block { // a restore into a larger volume
			if err := os.Truncate(dst, v.Capacity); err != nil {
				return err
			}
		}
	case v.Block:
		f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o660)
		if err != nil {
			return err
		}
		err = f.Truncate(v.Capacity) // sparse
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	default:
		// World-writable like an emptyDir, so a pod of any uid can write.
		if err := os.Mkdir(dst, 0o777); err != nil {
			return err
		}
		if err := os.Chmod(dst, 0o777); err != nil { // past the umask
			return err
		}
	}
	return writeJSON(filepath.Join(dir, volumeMeta), v)
}

// createSnapshot copies the volume's content and writes the record last.
func (s store) createSnapshot(sn snapshot) error {
	dir := s.snapshotDir(sn.ID)
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src := dataPath(s.volumeDir(sn.VolumeID), sn.Block)
	if err := copyData(src, dataPath(dir, sn.Block), sn.Block); err != nil {
		return fmt.Errorf("copy volume %s: %w", sn.VolumeID, err)
	}
	return writeJSON(filepath.Join(dir, snapshotMeta), sn)
}

// remove deletes a volume's or snapshot's directory: the record first, so
// a crash halfway leaves something invisible rather than half there.
func remove(dir, meta string) error {
	if err := os.Remove(filepath.Join(dir, meta)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(dir)
}

// copyData copies a volume's or snapshot's content.
func copyData(src, dst string, block bool) error {
	if block {
		return copySparse(src, dst)
	}
	return copyTree(src, dst)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSON writes v to path atomically (temporary file, fsync, rename).
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
