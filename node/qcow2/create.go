package qcow2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	clusterBits   = 16
	clusterSize   = 1 << clusterBits
	l2Bits        = clusterBits - 3 // 8-byte L2 entries per cluster
	refcountOrder = 4               // 16-bit refcounts
	headerLength  = 112             // version 3 with the compression type byte, padded
	sectorSize    = 512

	// The first clusters of every image: the header, the refcount table
	// and its one refcount block; the L1 table follows.
	refcountTableOffset = 1 * clusterSize
	refcountBlockOffset = 2 * clusterSize
	l1TableOffset       = 3 * clusterSize

	// MaxSize is the largest virtual size Create accepts: QEMU's limit on
	// the L1 table (32 MiB of entries) at 64 KiB clusters, 2 PiB.
	MaxSize = (32 << 20) / 8 << (clusterBits + l2Bits)

	// maxBackingName is QEMU's limit on a backing file name.
	maxBackingName = 1023

	extEnd           = 0x00000000
	extBackingFormat = 0xe2792aca
)

// Backing is the image an overlay reads the clusters it has not written
// from.
type Backing struct {
	Path   string // as QEMU will open it; absolute
	Format string // FormatRaw or FormatQCOW2
}

// Create writes an empty qcow2 image of size bytes, rounded up to 512 as
// qemu-img does, at path, backed by b unless b is nil. An existing file at
// path is replaced only once the new image is complete.
func Create(path string, size int64, b *Backing) error {
	meta, err := plan(size, b)
	if err != nil {
		return fmt.Errorf("qcow2 image %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := meta.write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("qcow2 image %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// metadata is an empty image's non-zero bytes and its length.
type metadata struct {
	header        []byte // cluster 0, up to the end of the backing name
	refcountTable []byte // at refcountTableOffset
	refcountBlock []byte // at refcountBlockOffset
	length        int64  // file length: the end of the L1 table
}

// plan lays an empty image of size bytes out (pure).
func plan(size int64, b *Backing) (metadata, error) {
	switch {
	case size <= 0:
		return metadata{}, fmt.Errorf("virtual size %d: must be positive", size)
	case size > MaxSize:
		return metadata{}, fmt.Errorf("virtual size %d: above qcow2's %d", size, int64(MaxSize))
	}
	size = (size + sectorSize - 1) / sectorSize * sectorSize
	l1Entries := (size + 1<<(clusterBits+l2Bits) - 1) >> (clusterBits + l2Bits)
	l1Clusters := (l1Entries*8 + clusterSize - 1) / clusterSize

	h := make([]byte, headerLength, clusterSize)
	be := binary.BigEndian
	copy(h[0:], "QFI\xfb")
	be.PutUint32(h[4:], 3) // version
	be.PutUint32(h[20:], clusterBits)
	be.PutUint64(h[24:], uint64(size))
	be.PutUint32(h[36:], uint32(l1Entries))
	be.PutUint64(h[40:], l1TableOffset)
	be.PutUint64(h[48:], refcountTableOffset)
	be.PutUint32(h[56:], 1) // refcount table clusters
	be.PutUint32(h[96:], refcountOrder)
	be.PutUint32(h[100:], headerLength)
	if b != nil {
		if err := b.check(); err != nil {
			return metadata{}, err
		}
		h = appendExtension(h, extBackingFormat, []byte(b.Format))
	}
	h = appendExtension(h, extEnd, nil)
	if b != nil {
		be.PutUint64(h[8:], uint64(len(h)))
		be.PutUint32(h[16:], uint32(len(b.Path)))
		h = append(h, b.Path...)
	}

	// One refcount block of 16-bit counts covers the metadata clusters:
	// at MaxSize the L1 table is 512 clusters of the block's 32768.
	used := 3 + l1Clusters
	rt := be.AppendUint64(nil, refcountBlockOffset)
	rb := make([]byte, 0, used*2)
	for range used {
		rb = be.AppendUint16(rb, 1)
	}
	return metadata{header: h, refcountTable: rt, refcountBlock: rb, length: l1TableOffset + l1Entries*8}, nil
}

// appendExtension appends a header extension: type, length, data padded
// to 8 bytes.
func appendExtension(h []byte, typ uint32, data []byte) []byte {
	h = binary.BigEndian.AppendUint32(h, typ)
	h = binary.BigEndian.AppendUint32(h, uint32(len(data)))
	h = append(h, data...)
	for len(h)%8 != 0 {
		h = append(h, 0)
	}
	return h
}

// check refuses a backing QEMU could not open as named.
func (b *Backing) check() error {
	switch {
	case b.Format != FormatRaw && b.Format != FormatQCOW2:
		return fmt.Errorf("backing format %q: want %s or %s", b.Format, FormatRaw, FormatQCOW2)
	case !filepath.IsAbs(b.Path):
		return fmt.Errorf("backing file %q: not an absolute path", b.Path)
	case len(b.Path) > maxBackingName:
		return fmt.Errorf("backing file %q: %d bytes, above QEMU's %d", b.Path, len(b.Path), maxBackingName)
	case strings.ContainsRune(b.Path, 0):
		return errors.New("backing file: contains a NUL byte")
	}
	return nil
}

// write puts m into f, a new empty file.
func (m metadata) write(f *os.File) error {
	if err := f.Truncate(m.length); err != nil {
		return err
	}
	for _, part := range []struct {
		at   int64
		data []byte
	}{{0, m.header}, {refcountTableOffset, m.refcountTable}, {refcountBlockOffset, m.refcountBlock}} {
		if _, err := f.WriteAt(part.data, part.at); err != nil {
			return err
		}
	}
	return nil
}
