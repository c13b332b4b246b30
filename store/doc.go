/*
Package store is the node agent's memory: one bbolt file (by default
/var/lib/nodevirt/agent.db) holding a Record per VMI on the node, keyed by the
VMI's UID, and a bounded lifecycle timeline per record. After a restart the
agent rebuilds its view from this file plus what it finds on the host, and
re-attaches to running QEMUs without disturbing them.

The package imports nothing of nodevirt's. The launch spec is opaque JSON
(json.RawMessage); phases and run states are the agent's strings.

# Schema

Schema version 1 (the key "schema" holds the version as a big-endian uint64):

	<file>
	╰── nodevirt                            bucket: everything of ours
	    ├── schema : <uint64>               schema version of the layout below
	    ├── records                         bucket: one key per VMI
	    │   ╰── <vmi uid> : <Record JSON>   {"version":1,"uid":…,"intent":…,…}
	    ╰── timelines                       bucket: one bucket per record
	        ╰── <vmi uid>                   bucket; its sequence is the last Seq
	            ╰── <seq uint64> : <Event JSON>

A timeline bucket exists only for a record that exists; deleting or pruning
a record deletes its timeline in the same transaction.

# Versions and migrations

Two versions are kept. The schema version covers the bucket layout: Open (when
writable) runs, in one transaction, every migration of an ordered table
newer than the file's version, so a file is either fully migrated or left as
it was. Version 0 is a file nodevirt never wrote; the 0→1 migration creates
the layout above. A later layout change is one more table entry. A file with
a newer version than the binary knows is refused with ErrVersion, as is a
read-only open of a file that is not at the current version (nodectl never
writes, so it cannot migrate).

The record version (Record.Version) covers the JSON encoding of one record.
Adding a field needs no bump: decoding ignores unknown fields and leaves
missing ones zero. A record newer than the binary fails with ErrVersion.

# Encoding

Records and events are JSON. The file is small (a few hundred records on a
node) and written at the rate of VM state changes, so encoding speed is not a
concern (see the benchmarks); in exchange JSON is readable with `bbolt get`
and nodectl, tolerates added fields in both directions without code
generation, and the launch spec, already JSON, is stored verbatim.

# Durability and intent

Every write is one bbolt read-write transaction, fsynced before it returns
(NoSync is never set). A process killed at any point leaves the file with
every committed transaction intact and none of an uncommitted one; the tests
prove this by SIGKILLing a writer repeatedly.

Intent is written before any side effect. To pause, the agent first makes
Intent.Paused durable with SetPaused (the intent log, below), and only after
it returns nil sends the QMP stop; then records what it observed with an
Update. A crash between the two leaves the intent on disk, and the
restarted agent finishes the job. The reverse order could pause a guest and
forget that the user asked for it.
Intent.Freeze works the same way with a deadline: the agent commits the
thaw deadline before guest-fsfreeze-freeze and clears it only after a
thaw succeeded, so a guest frozen by an agent that then died is thawed by
the next one (adding the field needed no version bump, see above).
Update takes the state change and its timeline events together, so a record
and its timeline never disagree.

# Intent log

A bbolt commit costs two fdatasyncs (pages, then meta) and re-encodes the
record; a pause or unpause is on the path users time. SetPaused writes the
intent instead to <file>.intents, a ring of 1024 slots of 512 bytes, created
zeroed and synced once so that an append overwrites allocated blocks and one
fdatasync makes it durable:

	slot: "NVI1" | CRC-32C (4) | seq (8) | length (2) | JSON {"uid","paused","event"}

Entries are numbered; entry seq lives in slot seq mod 1024. A slot whose CRC
or position does not match (never written, or torn by a crash) is ignored:
its SetPaused had not returned. Until an entry is in the bbolt file it is
pending, in memory: Get and List show it over the record they read, and
the next write of the record (Update, Put) applies it with its event, ahead
of the write's own events. A timer folds what is still pending into the
records 20 ms after the first entry, and Close folds the rest; a writable
Open replays, oldest first, the entries that a crash left unfolded, and a
read-only Open shows them like pending ones.

Record.IntentSeq says which entries a record reflects: a write sets it to
the highest seq written, so an entry of an earlier record of the same UID, a
superseded one, or one already folded is never applied again. A slot is
reused only once no pending entry is that old (else the pending entries are
folded first). The log numbers on from the highest IntentSeq of the file,
so a lost log file cannot make new entries look old.

# Lookups by name

RefsByName finds a VMI's records by namespace and name, with their Gone
times, without decoding any record, through an in-memory index
(namespace, name and Gone time of every record) that Open builds from the
file and every write transaction updates under bbolt's writer lock. The
index is a hint: readers check that the records it names are in the file
and skip what is not there, and a transaction that fails after changing it
has it rebuilt from the file. Prune finds its candidates the same way.

# Tombstones

MarkGone keeps the record of a VMI that is gone, with its timeline, so that
nodectl can still explain it. Prune removes tombstones older than
Options.Retention; the agent calls it periodically.

# Locking and concurrency

bbolt takes an flock on the file: exclusive for a writable open, shared for a
read-only one. Open waits at most Options.LockTimeout for it and then fails
with ErrLocked, so nodectl never hangs on a live agent's file.

A DB is safe for concurrent use by many goroutines. Reads run in parallel;
writes are serialized. Each method is one transaction; the function given to
Update runs inside it and must not call methods of the DB (bbolt's writer
lock is not reentrant). Context cancellation is checked before a transaction
starts; a started transaction is short and runs to completion.
*/
package store
