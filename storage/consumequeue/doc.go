// Package consumequeue implements RocketMQ's ConsumeQueue: for one (topic,
// queueId) a dense array of fixed-width entries, one per message, so that
// the message with queue offset N is entry N and reading a queue is array
// indexing. The CommitLog is the source of truth; a ConsumeQueue is derived
// from it by the store's dispatcher and can always be rebuilt.
//
// # Directory and files
//
// The store gives each queue its own directory,
// <data>/consumequeue/<topic>/<queueId>/. It holds:
//
//   - sparse data files of exactly EntriesPerFile entries (EntriesPerFile*20 bytes;
//     300 000 entries = 6 000 000 bytes by default), each named by the byte
//     offset of its first entry (first logical offset * 20) as 20 decimal
//     digits, zero-padded: 00000000000000000000, 00000000000006000000, ...
//     Lexical order is offset order. The files of a queue are contiguous: no
//     name is missing between the first and the last.
//   - MINOFFSET, optional, the persisted minimum logical offset (below).
//   - *.tmp files are unfinished creations and are deleted on Open.
//
// # Allocation (part of the on-disk format)
//
// A data file is EntriesPerFile*20 bytes long, but it is sparse: it is
// created as <name>.tmp, extended to its full size with ftruncate, zeros are
// written over its first 4 KiB page, it is fsynced, renamed to <name>, and
// the directory is fsynced. Unallocated ranges read as zeros, that is as
// empty entries, so the byte layout below is unchanged and files written by
// earlier versions (fully preallocated to 6 000 000 bytes) are read the
// same way. A file's size tells its capacity: EntriesPerFile must not
// change for an existing queue.
//
// Blocks are reserved ahead of the write position, never for the whole
// file: before an entry is written past the reserved end, zeros are written
// (pwrite) over the next range, which lies wholly beyond the last entry. So
// a write through the mapping never meets ENOSPC (which would be a SIGBUS):
// a full disk fails Put with an error instead. The range doubles with what
// the file already reserved, from 4 KiB to 1 MiB, so a queue with one
// message costs one 4 KiB block and a busy queue reserves 1 MiB at a time.
// Zeros are written rather than fallocate'd: an fallocate'd block is an
// unwritten extent, and the first write fault on it through a shared
// mapping waits for the file system's journal (milliseconds per queue on
// ext4), while a written block faults in microseconds. At Open the reserved
// end is MaxOffset's byte position, and the last file's blocks beyond the
// page holding it are released (fallocate PUNCH_HOLE, where the file system
// has it), which also returns the unused tail of an old, fully preallocated
// file to the file system.
//
// Each data file is memory-mapped read-write for its whole life; the
// descriptor is closed right after mapping. Mapping a sparse file allocates
// nothing, and only the pages the queue touches become resident.
//
// # Entry
//
// Part of the on-disk format; never change. 20 bytes, big-endian:
//
//	offset  size  field
//	     0     8  commitLogOffset  int64  physical offset of the record in the CommitLog
//	     8     4  size             int32  size of the record in bytes
//	    12     8  tagsCode         int64  tag hash, or due time (unix ms) in SCHEDULE_TOPIC_XXXX
//
// Entry N of the queue lives in the file whose name is
// (N / EntriesPerFile) * EntriesPerFile * 20, at byte (N % EntriesPerFile) * 20.
// An entry whose size is 0 is empty (preallocated zeros): a real record is
// never 0 bytes. A non-empty entry is valid when size > 0 and
// commitLogOffset >= 0; the commitLogOffsets of consecutive entries strictly
// increase, because the dispatcher reads the CommitLog in order (Put
// enforces it on append).
//
// # MINOFFSET
//
// Part of the on-disk format; never change. 16 bytes, big-endian, written
// atomically (tmp, fsync, rename, fsync dir):
//
//	offset  size  field
//	     0     4  magic      uint32  0x4D514D4F ("MQMO")
//	     4     8  minOffset  int64   smallest readable logical offset
//	    12     4  crc        uint32  CRC-32C (Castagnoli) of bytes 0..11
//
// The minimum offset is stored rather than derived because retention
// (DeleteBelowPhysical) moves it to the middle of a file, which a file name
// cannot express, and deleted entries are not zeroed. DeleteBelowPhysical
// writes MINOFFSET before it removes files, so a crash in between leaves
// files below the minimum, which Open removes. Without MINOFFSET (never
// trimmed) the minimum is the first data file's first entry. A MINOFFSET
// that fails its magic or CRC is ignored with a warning and the minimum
// falls back to that derivation (the queue is derived data: reading a few
// stale entries is recoverable, refusing to open is not).
//
// # Open and recovery
//
// Open reads only what it needs: the directory listing, MINOFFSET, and a
// few pages at the tail of the last data file, read with pread(2) rather
// than through the mapping, so recovery neither faults whole files into
// the process nor allocates blocks of a sparse file.
//
// The maximum offset (the next offset to write) is not stored. Open finds
// the tail of the last file by binary search for the first empty entry E
// whose predecessor is not empty (entries are written densely from the
// start of a queue; at most about 20 pages are read for a 6 MB file), and
// takes L = E-1 as the last non-empty entry. It then checks the window of
// the 1024 entries up to L (not below the minimum): MaxOffset is the first
// entry there that is empty, invalid or whose commitLogOffset is not above
// its predecessor's, or L+1 when all check out. Anything non-empty from
// MaxOffset to the end of its page is a torn or garbled tail (with mmap the
// kernel may write pages back in any order, so a valid-looking entry after
// a hole is not trusted): it is zeroed, the blocks of the last file beyond
// that page are released (above), and data files that start beyond
// MaxOffset are deleted. Entries below the window are assumed dense and
// valid; an entry found empty or invalid below MaxOffset at read time is
// reported as ErrCorrupt. This package cannot tell a queue whose tail was
// lost from a shorter queue: the store, which knows the CommitLog, checks
// the recovered queue against it and rebuilds a queue that is short or
// wrong (see package storage, "Derived state"). Files wholly below the
// minimum (a crash between writing MINOFFSET and deleting them) are deleted
// too. A last data file shorter than its full size (a lost tail) is
// extended with ftruncate (sparse zeros); any other size or alignment
// mismatch (for instance a changed EntriesPerFile, or a missing file
// between two others) is ErrCorrupt, and the store then rebuilds the queue.
//
// # Concurrency and durability
//
// One goroutine writes (Put, the dispatcher); Read, Get and LastEntry may
// run concurrently with it. Put writes an entry through the mapping and then
// publishes the new MaxOffset atomically, so a reader never sees an entry
// beyond MaxOffset half written. Structural changes (rolling to a new file,
// truncation, retention, Close) take a write lock that excludes readers, so
// no reader ever touches an unmapped file. Put does not sync; Flush msyncs
// the entries written since the last Flush (the store calls it from its
// flush service, and the CommitLog checkpoint decides what is known good).
// TruncateFrom msyncs the zeroed range before returning.
package consumequeue
