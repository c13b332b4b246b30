package cloudinit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kdomanski/iso9660"
)

// VolumeLabel is the label NoCloud looks for.
const VolumeLabel = "cidata"

// MetaData returns the meta-data file of cfg.
func (c Config) MetaData() []byte {
	b, err := json.Marshal(map[string]string{"instance-id": c.InstanceID, "local-hostname": c.LocalHostname})
	if err != nil {
		panic("cloudinit: encode meta-data: " + err.Error()) // two strings always encode
	}
	return append(b, '\n')
}

// Write writes cfg as a NoCloud ISO 9660 image to w. The ISO library stages
// the files in a temporary directory under os.TempDir() and removes it.
func Write(w io.Writer, cfg Config) error {
	iw, err := iso9660.NewWriter()
	if err != nil {
		return fmt.Errorf("cloud-init ISO: %w", err)
	}
	defer iw.Cleanup()
	files := []struct {
		name string
		data []byte
	}{
		{"user-data", cfg.UserData},
		{"meta-data", cfg.MetaData()},
	}
	if cfg.NetworkData != nil {
		files = append(files, struct {
			name string
			data []byte
		}{"network-config", cfg.NetworkData})
	}
	for _, f := range files {
		if err := iw.AddFile(bytes.NewReader(f.data), f.name); err != nil {
			return fmt.Errorf("cloud-init ISO: add %s: %w", f.name, err)
		}
	}
	if err := iw.WriteTo(w, VolumeLabel); err != nil {
		return fmt.Errorf("cloud-init ISO: write: %w", err)
	}
	// Pad like genisoimage does: without trailing sectors, busybox's
	// volume_id (findfs LABEL=cidata) reads past the end of a tiny image
	// on a CD-ROM and does not recognise it, and Linux's sr driver may
	// fail read-ahead near the end of the medium.
	if _, err := w.Write(make([]byte, padSectors*sectorSize)); err != nil {
		return fmt.Errorf("cloud-init ISO: pad: %w", err)
	}
	return nil
}

// ISO 9660 sector size and the padding genisoimage appends by default.
const (
	sectorSize = 2048
	padSectors = 150
)

// WriteFile writes cfg's ISO to path atomically (a temporary file in the
// same directory, renamed), creating the directory, and chowns the result
// to uid:gid unless uid is negative.
func WriteFile(path string, cfg Config, uid, gid int) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cloud-init ISO %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, ".cidata-*")
	if err != nil {
		return fmt.Errorf("cloud-init ISO %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := Write(tmp, cfg); err != nil {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("cloud-init ISO %s: %w", path, err)
	}
	if uid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			tmp.Close()
			return fmt.Errorf("cloud-init ISO %s: %w", path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cloud-init ISO %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cloud-init ISO %s: %w", path, err)
	}
	return nil
}
