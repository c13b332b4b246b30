package store

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The intent log makes a pause or unpause durable with one small write and
// one fdatasync, where a bbolt commit costs two fdatasyncs plus the record's
// JSON: a pause is on the path users time, and the intent must be on disk
// before QEMU stops the guest. See "Intent log" in doc.go for the format.
const (
	intentSlotSize  = 512
	intentSlots     = 1024
	intentHeader    = 18 // magic, CRC, seq, payload length
	intentMagic     = "NVI1"
	intentFoldDelay = 20 * time.Millisecond
	intentLogSuffix = ".intents"
)

// castagnoli checks a slot: a slot torn by a crash fails it and is ignored.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// intent is one entry of the intent log: the pause intent of the record UID,
// with the timeline event that goes with it.
type intent struct {
	Seq    uint64 `json:"-"`
	UID    string `json:"uid"`
	Paused bool   `json:"paused"`
	Event  Event  `json:"event"`
}

// intentLog is the open log file and the entries not yet folded into the
// bbolt file.
type intentLog struct {
	f *os.File // nil for a read-only store

	mu    sync.Mutex // everything below
	hwm   uint64     // highest seq written
	slots []uint64   // seq held by each slot
	// pending are the entries not folded yet, per record, oldest first:
	// the newest is the intent, and each has its event for the timeline.
	pending map[string][]intent
	fold    *time.Timer // nil once closed
	armed   bool        // fold is due
}

// openIntentLog opens (creating, when writable, a zeroed and synced file)
// the log at path and returns it with its valid entries, oldest first.
// minSeq is the highest seq the records already reflect: the log numbers
// on from the higher of it and its own entries, so that a lost log file
// cannot make old entries look new.
func openIntentLog(path string, readOnly bool, minSeq uint64) (*intentLog, []intent, error) {
	l := &intentLog{hwm: minSeq, slots: make([]uint64, intentSlots), pending: map[string][]intent{}}
	flag := os.O_RDWR | os.O_CREATE
	if readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if readOnly && errors.Is(err, os.ErrNotExist) {
		return l, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("intent log: %w", err)
	}
	buf := make([]byte, intentSlots*intentSlotSize)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, nil, fmt.Errorf("intent log %q: %w", path, err)
	}
	var entries []intent
	for i := range intentSlots {
		if (i+1)*intentSlotSize > n {
			break
		}
		e, ok := decodeIntent(buf[i*intentSlotSize : (i+1)*intentSlotSize])
		if !ok || e.Seq%intentSlots != uint64(i) {
			continue
		}
		l.slots[i] = e.Seq
		l.hwm = max(l.hwm, e.Seq)
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b intent) int { return cmp.Compare(a.Seq, b.Seq) })
	if readOnly {
		f.Close()
		return l, entries, nil
	}
	if n < len(buf) {
		// A new (or short) file: written in full once, so that an append
		// overwrites allocated blocks and its fdatasync flushes data only.
		clear(buf[n:])
		if _, err := f.WriteAt(buf[n:], int64(n)); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("intent log %q: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("intent log %q: %w", path, err)
		}
		if err := syncDir(path); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("intent log %q: %w", path, err)
		}
	}
	l.f = f
	return l, entries, nil
}

// syncDir makes a new file's directory entry durable.
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// encodeIntent lays e out as one slot.
func encodeIntent(e intent) ([]byte, error) {
	payload, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	if len(payload) > intentSlotSize-intentHeader {
		return nil, fmt.Errorf("intent of %q: %d bytes, the slot holds %d: %w",
			e.UID, len(payload), intentSlotSize-intentHeader, ErrInvalid)
	}
	slot := make([]byte, intentSlotSize)
	copy(slot, intentMagic)
	binary.BigEndian.PutUint64(slot[8:], e.Seq)
	binary.BigEndian.PutUint16(slot[16:], uint16(len(payload)))
	copy(slot[intentHeader:], payload)
	binary.BigEndian.PutUint32(slot[4:], crc32.Checksum(slot[8:intentHeader+len(payload)], castagnoli))
	return slot, nil
}

// decodeIntent reads a slot; ok is false for an empty or torn one.
func decodeIntent(slot []byte) (intent, bool) {
	if string(slot[:4]) != intentMagic {
		return intent{}, false
	}
	n := int(binary.BigEndian.Uint16(slot[16:]))
	if n > intentSlotSize-intentHeader ||
		crc32.Checksum(slot[8:intentHeader+n], castagnoli) != binary.BigEndian.Uint32(slot[4:]) {
		return intent{}, false
	}
	var e intent
	if err := json.Unmarshal(slot[intentHeader:intentHeader+n], &e); err != nil || e.UID == "" {
		return intent{}, false
	}
	e.Seq = binary.BigEndian.Uint64(slot[8:])
	return e, e.Seq != 0
}

// SetPaused records that the live record uid is to be paused (or run), with
// ev for its timeline: durable when it returns nil, at the cost of one
// 512-byte write and one fdatasync of the intent log, not a bbolt commit.
// Every read of the record sees it from then on; it is folded into the
// bbolt file shortly after, or by the next write of the record, or when
// the store is opened after a crash. It fails with ErrNotFound when there
// is no live record uid.
func (db *DB) SetPaused(ctx context.Context, uid string, paused bool, ev Event) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !db.ix.isLive(uid) {
		return fmt.Errorf("set pause intent of %q: %w", uid, ErrNotFound)
	}
	if err := db.log.append(db, intent{UID: uid, Paused: paused, Event: ev}); err != nil {
		return fmt.Errorf("set pause intent of %q: %w", uid, err)
	}
	return nil
}

// append writes e in the next slot, syncs it and makes it pending. A slot
// still holding a pending entry is folded into the bbolt file first.
func (l *intentLog) append(db *DB, e intent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		e.Seq = l.hwm + 1
		if old := l.slots[e.Seq%intentSlots]; old == 0 || !l.isPending(old) {
			break
		}
		l.mu.Unlock()
		err := db.foldIntents()
		l.mu.Lock()
		if err != nil {
			return err
		}
	}
	slot, err := encodeIntent(e)
	if err != nil {
		return err
	}
	if _, err := l.f.WriteAt(slot, int64(e.Seq%intentSlots)*intentSlotSize); err != nil {
		return fmt.Errorf("intent log: %w", err)
	}
	if err := unix.Fdatasync(int(l.f.Fd())); err != nil {
		return fmt.Errorf("intent log: fdatasync: %w", err)
	}
	l.slots[e.Seq%intentSlots] = e.Seq
	l.hwm = e.Seq
	l.pending[e.UID] = append(l.pending[e.UID], e)
	if l.fold != nil && !l.armed {
		l.armed = true
		l.fold.Reset(intentFoldDelay)
	}
	return nil
}

// isPending reports whether the slot holding seq may still be needed: it
// is not older than every pending entry.
func (l *intentLog) isPending(seq uint64) bool {
	for _, es := range l.pending {
		if seq >= es[0].Seq {
			return true
		}
	}
	return false
}

// lookup returns the newest pending entry of uid, if any.
func (l *intentLog) lookup(uid string) (intent, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	es := l.pending[uid]
	if len(es) == 0 {
		return intent{}, false
	}
	return es[len(es)-1], true
}

// claim returns the pending entries of r's record that r does not reflect
// yet, oldest first, and the highest seq written: a write of r that applies
// them reflects every entry of its record up to that seq.
func (l *intentLog) claim(r *Record) (es []intent, hwm uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.pending[r.UID] {
		if e.Seq > r.IntentSeq {
			es = append(es, e)
		}
	}
	return es, l.hwm
}

// forget drops the pending entries a committed write applied (each entry
// of its record up to an applied one).
func (l *intentLog) forget(applied []intent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range applied {
		es := slices.DeleteFunc(l.pending[a.UID], func(e intent) bool { return e.Seq <= a.Seq })
		if len(es) == 0 {
			delete(l.pending, a.UID)
		} else {
			l.pending[a.UID] = es
		}
	}
}

// all returns the newest pending entry of every record, oldest first.
func (l *intentLog) all() []intent {
	l.mu.Lock()
	defer l.mu.Unlock()
	es := make([]intent, 0, len(l.pending))
	for _, p := range l.pending {
		es = append(es, p[len(p)-1])
	}
	slices.SortFunc(es, func(a, b intent) int { return cmp.Compare(a.Seq, b.Seq) })
	return es
}

// overlay applies a pending entry to r as read in a read transaction.
func (e intent) overlay(r *Record) {
	if e.UID == r.UID && e.Seq > r.IntentSeq {
		r.Intent.Paused = e.Paused
		r.IntentSeq = e.Seq
	}
}

// absorb applies to r, read in a write transaction, the pending entry it
// does not reflect, stamps r with the highest seq written and notes the
// entry (its event goes to the timeline, and it is forgotten once the
// transaction commits).
func (b buckets) absorb(r *Record) {
	es, hwm := b.log.claim(r)
	for _, e := range es {
		e.overlay(r)
		*b.absorbed = append(*b.absorbed, e)
	}
	r.IntentSeq = max(r.IntentSeq, hwm)
}

// absorbedEvents returns the events of the entries absorbed for uid.
func (b buckets) absorbedEvents(uid string) []Event {
	var evs []Event
	for _, e := range *b.absorbed {
		if e.UID == uid {
			evs = append(evs, e.Event)
		}
	}
	return evs
}

// foldIntents writes the pending entries into their records (and their
// events into the timelines) in one transaction. An entry whose record is
// gone or deleted is dropped.
func (db *DB) foldIntents() error {
	pending := db.log.all()
	if len(pending) == 0 {
		return nil
	}
	err := db.update(context.Background(), func(b buckets) error {
		for _, e := range pending {
			r, err := b.get(e.UID)
			if errors.Is(err, ErrNotFound) {
				*b.absorbed = append(*b.absorbed, e)
				continue
			}
			if err != nil {
				return err
			}
			if r.IsGone() || r.IntentSeq >= e.Seq {
				*b.absorbed = append(*b.absorbed, e)
				continue
			}
			b.absorb(&r)
			if err := b.put(&r); err != nil {
				return err
			}
			if err := b.appendEvents(r.UID, b.absorbedEvents(r.UID), db.opts.TimelineLimit); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fold intent log: %w", err)
	}
	return nil
}

// startFolding folds pending entries intentFoldDelay after the first
// append that found none due.
func (l *intentLog) startFolding(db *DB) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fold = time.AfterFunc(time.Hour, func() {
		l.mu.Lock()
		l.armed = false
		l.mu.Unlock()
		if err := db.foldIntents(); err != nil {
			l.mu.Lock()
			if l.fold != nil && !l.armed {
				l.armed = true
				l.fold.Reset(time.Second) // retried; reads see the entries meanwhile
			}
			l.mu.Unlock()
		}
	})
	l.fold.Stop()
}

// close stops folding, folds what is pending and closes the file.
func (l *intentLog) close(db *DB) error {
	l.mu.Lock()
	t := l.fold
	l.fold = nil
	l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	if t != nil {
		t.Stop()
	}
	return errors.Join(db.foldIntents(), l.f.Close())
}
