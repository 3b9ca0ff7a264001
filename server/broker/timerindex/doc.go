// Package timerindex is the on-disk index of the broker's pending timers
// (delayMs / deliverAt sends): which timer records are pending, in due
// order, and how many per destination topic, in memory that does not grow
// with the number of timers. It is RocketMQ 5's TimerMessageStore idea —
// the messages stay in the CommitLog, a derived index orders them by due
// time — with sorted runs instead of a time wheel, so that timers can also
// be listed soonest first from any position.
//
// The index knows nothing of messages. Its user (the broker) follows two
// queues of the store — the timer queue, one record per timer record
// (registration, reschedule, retention carry), and the status queue, whose
// records settle timer records (delivered, cancelled) — and applies what
// it reads as an Update: births (a timer record with its due time, its
// timer's id and destination topic, identified by its offset in the timer
// queue, its seq) and kills (a seq that is no longer pending: delivered,
// cancelled, or superseded by a newer record of the same timer). A birth
// is applied once, in seq order; a kill is idempotent and names the
// record it ends, so replaying the queues from a checkpointed position
// reaches the same state, whatever the order of kills. Everything here is derived from the
// CommitLog and can be rebuilt from it (the broker does, from the queues'
// minimums, when Open fails).
//
// # State
//
//   - The live set: the seqs of pending records, as a set of 65 536-seq
//     chunks, each a sorted array of 16-bit offsets (up to 4 096 members)
//     or an 8 KiB bitmap (RoaringBitmap's containers): 2 bytes per
//     pending timer (up to 4 in memory, with the arrays' growth slack),
//     and 1 bit per seq where they are dense. Seqs below its floor (the
//     timer queue's minimum: deleted by retention) are dead.
//   - Sorted runs: immutable files of (due, id, seq, topic) entries in
//     ascending (due, id, seq) order: soonest first, and timers due at
//     the same time by id (which, unlike seq, a timer keeps when it is
//     copied, so a listing resumed from a key is stable). An entry is
//     pending while its seq is in the live set; dead entries are skipped
//     on reading and dropped when runs are merged.
//   - The buffer: births not yet written to a run, sorted in memory
//     (at most Options.BufferEntries before a checkpoint writes them out).
//   - The topic table (ordinal -> name) and the pending count per topic.
//
// Reading in due order merges the buffer and the runs. Each run keeps a
// head: entries before it are known dead, so the soonest pending timer is
// found without reading the delivered ones again.
//
// # Files (part of the on-disk format; never change)
//
//	<dir>/CHECKPOINT        the state above except the buffer, replaced
//	                        atomically (tmp, fsync, rename, fsync dir)
//	<dir>/%020d.run         a sorted run, named by its run id
//	<dir>/*.tmp             unfinished writes, deleted by Open
//
// Any other *.run file is an orphan (a crash between writing a run and
// the checkpoint that lists it, or after a merge replaced it) and is
// deleted by Open. All integers are big-endian; CRCs are CRC-32C
// (Castagnoli).
//
// # Run file (part of the on-disk format; never change)
//
//	off  len  field
//	0    4    magic     0x4D515452 ("MQTR")
//	4    2    version   1
//	6    2    reserved  0
//	8    8    entries   n
//	16   4    crc       CRC-32C of the n entries
//	20   4    hcrc      CRC-32C of bytes [0:20]
//	24   28n  entries, ascending by (due, id, seq), no two equal
//
// Entry (28 bytes):
//
//	off  len  field
//	0    8    due    int64   unix milliseconds
//	8    8    id     int64   the timer's id: CommitLog offset of its first record
//	16   8    seq    int64   offset of the record in the timer queue
//	24   4    topic  uint32  ordinal in the checkpoint's topic table
//
// # Checkpoint (part of the on-disk format; never change)
//
//	off  len  field
//	0    4    magic     0x4D515443 ("MQTC")
//	4    2    version   1
//	6    2    flags     bit 0: the per-topic counts are stale (recount)
//	8    4    length    of the body in bytes
//	12   4    crc       CRC-32C of the body
//	16   ...  body
//
// Body, in order:
//
//	position   timers int64, statuses int64: the next seq of each queue
//	           not applied; then timerMark seq int64, phys int64 and
//	           statusMark seq int64, phys int64: the last record applied
//	           from each queue and its CommitLog offset (seq -1: none),
//	           which the user checks against its queues before trusting
//	           the checkpoint
//	nextRun    uint64, the id of the next run file
//	runs       uint32 count, then per run: id uint64, tier uint8,
//	           entries uint64, head uint64, crc uint32 (the run file's
//	           entry crc, checked against it)
//	topics     uint32 count, then per ordinal: length uint16, name,
//	           pending int64
//	live       floor int64 (seqs below are dead), total int64 (members),
//	           uint32 chunk count, then per chunk, ascending: number
//	           uint32 (seq >> 16), kind uint8 (0 array, 1 bitmap),
//	           cardinality uint32, then cardinality uint16 offsets
//	           (array, ascending) or 1 024 uint64 words (bitmap; bit b of
//	           word w is offset 64w+b)
//
// # Lifecycle and durability
//
// Open reads the checkpoint and verifies every run it lists (header, size
// and entry crc); any mismatch is ErrCorrupt, a missing checkpoint
// ErrNotFound: the user rebuilds (Create, then replays its queues from
// their minimums). Checkpoint writes the buffer as a new run (tmp, fsync,
// rename), then the checkpoint; a run whose head reached its end is wholly
// dead and dropped. Compact merges FanIn runs of one tier into one run of
// the next tier (size-tiered), dropping dead entries, then checkpoints
// and deletes its inputs. Files are only removed after a checkpoint that no
// longer lists them is durable. A crash anywhere leaves the last durable
// checkpoint and its runs intact; the user replays its queues from the
// checkpoint's position, which repeats no birth (births below the
// position are ignored) and repeats kills harmlessly.
//
// The index never claims more than its queues hold: the position is what
// was applied, and the user refuses a checkpoint whose position lies
// beyond its queues' ends or whose marks name other records (an async-mode
// power loss lost records the checkpoint covered) and rebuilds.
//
// # Concurrency
//
// An Index is safe for concurrent use. Apply, Scan and the readers take a
// mutex; Checkpoint and Compact do their file I/O outside it on snapshots
// and swap the result in under it, and must not run concurrently with each
// other (the user calls both from one goroutine).
package timerindex
