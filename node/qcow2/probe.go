package qcow2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// The disk image formats a containerDisk may hold.
const (
	FormatRaw   = "raw"
	FormatQCOW2 = "qcow2"
)

// Probe reports the format of the image at path (qcow2 by its magic,
// otherwise raw) and its virtual size: a qcow2 header's, a raw image's
// length (a block device's too).
func Probe(path string) (format string, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	var h [32]byte
	n, err := io.ReadFull(f, h[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", 0, fmt.Errorf("read %s: %w", path, err)
	}
	if n >= 4 && string(h[:4]) == "QFI\xfb" {
		if n < len(h) {
			return "", 0, fmt.Errorf("%s: qcow2 header cut short at %d bytes", path, n)
		}
		size := binary.BigEndian.Uint64(h[24:])
		if size > MaxSize {
			return "", 0, fmt.Errorf("%s: qcow2 virtual size %d above %d", path, size, int64(MaxSize))
		}
		return FormatQCOW2, int64(size), nil
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", 0, fmt.Errorf("size of %s: %w", path, err)
	}
	return FormatRaw, end, nil
}
