package migration

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestHeader_RoundTrip(t *testing.T) {
	for _, h := range []Header{
		{MigrationUID: "0d6c5e4a-8f1b-4c55-9a0e-3f1e2d4c5b6a", Stream: 0},
		{MigrationUID: "x", Stream: 65535},
		{MigrationUID: "d1", Kind: KindDisks, Stream: 3},
	} {
		var b bytes.Buffer
		if _, err := h.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		b.WriteString("payload")
		got, err := ReadHeader(&b)
		if err != nil || got != h {
			t.Errorf("ReadHeader = %+v, %v; want %+v", got, err, h)
		}
		if b.String() != "payload" {
			t.Errorf("ReadHeader consumed the payload: %q left", b.String())
		}
	}
}

func TestHeader_Invalid(t *testing.T) {
	tests := []struct {
		name string
		wire string
	}{
		{"Empty", ""},
		{"WrongMagic", "QEVM\x00\x01a\x00\x00"},
		{"OldVersion", "NVM1\x01a\x00\x00"},
		{"UnknownKind", "NVM2\x07\x01a\x00\x00"},
		{"ZeroLength", "NVM2\x00\x00\x00\x00"},
		{"TooLong", "NVM2\x00\x41" + strings.Repeat("a", 65) + "\x00\x00"},
		{"BadCharacter", "NVM2\x00\x03a/b\x00\x00"},
		{"Truncated", "NVM2\x00\x05abc"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadHeader(strings.NewReader(tc.wire)); !errors.Is(err, ErrBadHeader) {
				t.Errorf("ReadHeader(%q) = %v, want ErrBadHeader", tc.wire, err)
			}
		})
	}
	if _, err := (Header{MigrationUID: "../x"}).WriteTo(&bytes.Buffer{}); !errors.Is(err, ErrBadHeader) {
		t.Errorf("WriteTo with a bad UID = %v, want ErrBadHeader", err)
	}
}
