package migration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Kind is what a channel connection carries.
type Kind byte

const (
	// KindState is QEMU's migration stream (RAM and device state), to the
	// target QEMU's incoming socket.
	KindState Kind = 0
	// KindDisks is an NBD connection of the disk mirrors, to the target
	// QEMU's NBD server, which exports its node-local disks.
	KindDisks Kind = 1
)

// Header opens every connection on the channel.
//
// Wire format: the 4 magic bytes "NVM2", the Kind byte, one byte of UID
// length (1..64), the UID, then the stream number as a big-endian uint16.
type Header struct {
	// MigrationUID is the VirtualMachineInstanceMigration's UID.
	MigrationUID string
	// Kind says which of the target QEMU's sockets the stream goes to.
	Kind Kind
	// Stream numbers the connections of one migration (0 is the first
	// QEMU opened; multifd channels follow).
	Stream uint16
}

const (
	headerMagic  = "NVM2"
	maxUIDLength = 64
)

// ErrBadHeader is a connection that does not start with a valid Header.
var ErrBadHeader = errors.New("bad migration channel header")

// WriteTo writes h to w.
func (h Header) WriteTo(w io.Writer) (int64, error) {
	if err := h.validate(); err != nil {
		return 0, err
	}
	b := make([]byte, 0, len(headerMagic)+2+len(h.MigrationUID)+2)
	b = append(b, headerMagic...)
	b = append(b, byte(h.Kind))
	b = append(b, byte(len(h.MigrationUID)))
	b = append(b, h.MigrationUID...)
	b = binary.BigEndian.AppendUint16(b, h.Stream)
	n, err := w.Write(b)
	return int64(n), err
}

// ReadHeader reads a Header from r.
func ReadHeader(r io.Reader) (Header, error) {
	var pre [len(headerMagic) + 2]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return Header{}, fmt.Errorf("%w: %w", ErrBadHeader, err)
	}
	if string(pre[:len(headerMagic)]) != headerMagic {
		return Header{}, fmt.Errorf("%w: magic %q", ErrBadHeader, pre[:len(headerMagic)])
	}
	rest := make([]byte, int(pre[len(headerMagic)+1])+2)
	if _, err := io.ReadFull(r, rest); err != nil {
		return Header{}, fmt.Errorf("%w: %w", ErrBadHeader, err)
	}
	h := Header{MigrationUID: string(rest[:len(rest)-2]), Kind: Kind(pre[len(headerMagic)]), Stream: binary.BigEndian.Uint16(rest[len(rest)-2:])}
	if err := h.validate(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// validate wants a UID of 1..64 characters of [0-9A-Za-z-].
func (h Header) validate() error {
	if h.Kind != KindState && h.Kind != KindDisks {
		return fmt.Errorf("%w: kind %d", ErrBadHeader, h.Kind)
	}
	if len(h.MigrationUID) == 0 || len(h.MigrationUID) > maxUIDLength {
		return fmt.Errorf("%w: migration UID length %d", ErrBadHeader, len(h.MigrationUID))
	}
	for _, c := range h.MigrationUID {
		ok := c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		if !ok {
			return fmt.Errorf("%w: migration UID %q", ErrBadHeader, h.MigrationUID)
		}
	}
	return nil
}
