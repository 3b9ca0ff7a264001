// Package commitlog is mqgate's CommitLog: an append-only log of opaque,
// framed records stored in fixed-size, memory-mapped segment files whose
// blocks are allocated ahead of need (RocketMQ's CommitLog with etcd-WAL-style framing and recovery).
//
// The package knows nothing about messages. A caller hands Append an
// Encoder; the log reserves a frame, lets the Encoder write the payload
// into its write buffer (stamping it with the frame's log offset),
// checksums the frame, writes it to the segment file and, in FlushSync
// mode, returns only once an fdatasync covering the frame has succeeded.
// Readers read the segments through their mappings.
//
// # Files
//
// All files live directly in Options.Dir:
//
//	00000000000000000000            segment whose first byte is log offset 0
//	00000000001073741824            next segment (base = previous base + previous size)
//	00000000001073741824.tmp        a segment being created (removed on Open)
//	00000000000000000000.broken     forensic copy of a torn tail, or a quarantined segment
//	00000000000000000000.broken.1   further ones get a numeric suffix; never deleted by the log
//
// A segment file is named by its base offset printed as %020d, so lexical
// order is log order. Its length is its size: new segments are created with
// Options.SegmentSize bytes (sparse: they read as zeros, and only the
// blocks ahead of the write position are allocated; see Disk space), but
// a segment written under an older setting keeps its own length. Segments are contiguous: the next
// segment's base is this segment's base plus its length. Log offsets are
// global byte offsets: the frame at offset o lives at byte o-base of the
// segment containing o.
//
// # Frame
//
// Integers are big-endian. Every frame starts with a 20-byte header:
//
//	off len field
//	0   4   totalSize uint32  whole frame including this header
//	4   4   magic     uint32  RecordMagic 0xDAA320A7, or BlankMagic 0xCBD43194
//	8   4   crc       uint32  CRC-32C (Castagnoli) over frame[0:8] then frame[12:totalSize]
//	12  8   offset    int64   the frame's own log offset
//	20  ... payload           totalSize-20 opaque bytes (records only)
//
// A Blank frame fills the rest of a segment that cannot take the next
// record: totalSize is the number of bytes left in the segment, and its
// crc covers its header only (frame[0:8] then frame[12:20]); the bytes after
// its header are not written (they stay zero). A frame whose stored offset
// differs from its position is invalid (this catches misdirected or stale
// writes, ARCHITECTURE.md crash-consistency rule 3). A header whose totalSize is 0 ends the
// data: segments read as zeros past it.
//
// Placement invariant: a record never spans segments. It goes into the
// current segment only if it fills the segment exactly or leaves at least
// HeaderSize bytes; otherwise a Blank frame covers the rest and the record
// starts the next segment. Consequently a frame larger than SegmentSize, or
// one that would leave 1..HeaderSize-1 bytes of an empty segment, is
// refused with ErrRecordTooLarge. A segment shorter than HeaderSize bytes
// after its last frame (possible only for a segment an operator truncated)
// ends there implicitly when those bytes are zero; the writer then starts
// the next segment without a Blank frame.
//
// # Lifecycle
//
// Create: a segment is created as <name>.tmp, ftruncate'd to full size,
// its first blocks fallocate'd (Options.Reserve bytes; the first segment
// of a new log the first window, 4 MiB), fdatasync'd, renamed to <name>,
// and the directory is fsync'd (etcd cut()). A background goroutine owned
// by the Log (the allocator) prepares the segment after the active one
// this way at Open and at each roll, and the one after that once the
// active segment is nearly full (a producer's append needs it: see Disk
// space), so a roll is a pointer swap; it also allocates blocks ahead of
// the write position.
//
// Append: one appender at a time (a mutex). The frames of an append (or a
// batch) are encoded into a write buffer, the CRC computed over them there,
// the buffer written to the segment file (see Writes), and Written
// advances. FlushSync: an append that waits for its flush leaves its
// frames in the buffer; a flusher goroutine writes the buffer — the
// frames of every append since the last flush — with one pwrite,
// publishes Written, fdatasyncs the segments holding [Flushed, Written)
// and wakes every appender whose frame ends at or below the new Flushed
// (group commit: one write and one fdatasync for all of them). With one
// P (GOMAXPROCS=1, a container limited to one CPU) the flusher first
// yields to the appenders that can run and waits, at most one
// fdatasync's time, for most of the last group to append again: else
// the first appender's kick runs it ahead of the others, and its
// fdatasync holds the only P (flush.go, gather and waitForGroup). A roll
// writes the buffer to the segment it seals first. AppendBatchNoWait writes its frames
// (and those in the buffer) at once but does not wait: they ride on the next flush, and arm one
// LazyFlushDelay later in case no waiting append comes (for records whose
// loss in a machine crash repeats work and loses nothing, such as the
// broker's lease records). FlushAsync: the flusher runs every
// FlushInterval; the loss window after a crash is one interval. A failed
// fdatasync, or a failed pwrite of a frame, kills the write path for good
// (fsyncgate): waiting and later appends get ErrReadOnly and Err reports
// the cause.
//
// # Writes
//
// In FlushSync, frames reach the file through pwrite, not through stores
// into the mapping, and are made durable with fdatasync, not msync; reads
// stay on the mapping (Linux has one page cache, so a reader sees a
// pwritten frame as soon as Written covers it). This is RocketMQ's
// transientStorePool path (write to a buffer, FileChannel.write, force)
// rather than its default of writing into the MappedByteBuffer. A store
// into a shared mapping write-faults every page that the last flush
// cleaned (and ext4 updates the file's times from that fault); with a
// flush every few appends that cost more CPU per append than a pwrite of
// the whole append or batch, and the send paths are CPU-bound
// (BENCHMARKS.md has the figures). Waiting appends share the flusher's
// pwrite as they share its fdatasync: each such pwrite also costs ext4 a
// journal handle for the file's times. In FlushAsync, where a flush comes
// only every FlushInterval and a page is faulted about once, the frames
// are copied into the mapping instead, which saves the system call per
// append; fdatasync writes those pages back all the same.
//
// Blocks are fallocate'd, not zeroed, and the fdatasync of a frame
// written into a fallocate'd ("unwritten") block also commits the block's
// conversion to the file system's journal, about as costly again as the
// flush itself. So while flushes are small (under 64 KiB on average:
// single sends, acks), FlushSync keeps up to ZeroAhead bytes (1 MiB) past
// the last frame written with zeros (zeroAheadLocked, under the append
// lock with nothing staged, so no frame is ever written into a range
// being zeroed); the next flush converts that range once and the flushes
// after it land in written blocks. Big flushes (batches) skip it: the
// zeros would cost them as much page-cache work as their own data. After
// a crash an unflushed range of zeros reads as zeros all the same.
// Zeroing whole segments before use (with O_DIRECT, while the previous
// one fills) and starting a batch's writeback early (sync_file_range)
// were both measured and both slowed durable batches: the zeros are as
// many bytes to the disk as the frames (BENCHMARKS.md, "Pre-written
// blocks, early writeback, async acks").
//
// A sealed segment's file is closed once it is flushed: a log keeps open
// the files it still writes.
//
// Roll: an append (or batch) that will not fit the active segment first
// reserves every segment it will roll into — takes the one the allocator
// prepared, and waits for further ones — and only then writes its first
// frame. A segment that cannot be created (ENOSPC from fallocate on a full
// disk, or any other error) refuses the whole append with ErrNoSpace
// before any byte of it is written; the write path stays alive (Err is
// nil), the creation is attempted again by the next append that needs it,
// and appends resume by themselves once space returns. A creation that
// fails leaves no file behind (the .tmp, or the renamed file, is removed).
//
// # Disk space
//
// Only allocated blocks are ever written: a pwrite into a hole on a full
// file system fails (which would kill the write path) and a store into
// the mapping there raises SIGBUS. Before an append writes anything it
// plans where its frames go and makes sure every byte it will write (and
// HeaderSize bytes after its last frame, room for a Blank frame's header)
// is allocated, fallocate'ing what is missing itself; a failure refuses
// it with ErrNoSpace, whole. The allocator keeps a window allocated ahead
// of the write position, off the append path: it grows with the data in
// the segment, from 4 MiB in a fresh one to 64 MiB (aheadFor), and is
// topped up once less than half is left, so appends almost always find
// their blocks allocated and a small log takes little disk: a new log
// with a few records takes 4 MiB plus the next segment's reserve (20 MiB
// with the 16 MiB default), where whole preallocated 1 GiB segments took
// 2 GiB. Writes still land in fallocate'd blocks, never in holes (the
// write costs of the two are in BENCHMARKS.md).
//
// The reserve: the segment after the active one is created with its first
// Options.Reserve bytes (16 MiB, at most a segment) allocated. Appends say
// what they may use (Use). A KeepReserve append (a producer's message) is
// accepted only if its bytes can be allocated in place and the segment
// after its last one exists with its reserve: on a file system filling
// up, producers are refused while the reserve is still whole. A
// UseReserve append (the broker's own records) whose segment cannot be
// given more blocks rolls early into that next segment — a Blank frame
// covers the rest of the active one, as for any roll — and is refused
// only when the reserve is used up too. So the broker's records always
// have at least Reserve bytes after producers are refused, whoever filled
// the disk. Room reports the room and whether the last append of each Use
// was refused. A file system without fallocate (EOPNOTSUPP) counts as
// allocated: there the reserve is not real and a full disk can still
// fail a write.
//
// Open/recover: .tmp leftovers are removed. The scan starts at the segment
// containing Options.RecoverFrom (a checkpointed frame boundary; segments
// before it are trusted) and walks frames, checking size bounds, magic,
// stored offset and CRC, following Blank frames into the next segment. It
// stops at the first frame that is not valid (a zero header included); that
// position is the end of the log. If the end lies below Options.HighWater
// (data known to have been durable) the log is corrupt: Open fails with
// ErrCorrupt unless Options.AllowCorrupt (see Repair for the way out that
// keeps the data after the damage). Otherwise everything after the end
// is a torn tail and is cut off, never deleted: the non-zero bytes after the
// end in its segment are copied to <segment>.broken and zeroed (through the
// mapping, then msync'd),
// and every later segment file that holds any non-zero byte is renamed to
// <segment>.broken (all-zero ones, i.e. prepared but unused, are
// removed). The recovered active segment counts as allocated up to the
// end of the data; the allocator allocates the window after it again. A valid-looking frame after an invalid one is never trusted:
// the kernel may write mmap pages back in any order (rule 6).
//
// # Reads
//
// Read and Next validate the whole frame before returning it — size
// bounds, magic, stored offset, then the CRC over every byte — so a record
// whose bytes changed after they were written (a bit flip on the device or
// in the page cache, a stray write) is never returned. CRC-32C uses the
// CPU's instruction (SSE 4.2 on amd64, the CRC extension on arm64) at
// about the speed of the copy Read makes anyway, so a cached read costs up
// to twice the bare copy (BenchmarkRead) and a consumer's read through the
// store, which also decodes and allocates, little more (the storage
// package's BenchmarkReadQueue). The checks are ordered so that the
// failure tells what is known:
//
//   - ErrChecksum (which wraps ErrCorrupt): size, magic and stored offset
//     are valid and only the CRC fails. The frame's extent is trusted —
//     the size field is covered by the CRC too, but a wrong size would
//     almost surely also misplace the next frame, whose own stored offset
//     would then not match — so Read reports the record's Offset and Size
//     and Next returns the offset after it: a caller may pass over it.
//   - ErrCorrupt without ErrChecksum: the header itself is garbage (or the
//     offset is not a frame start). Nothing after it can be located
//     without guessing; Next does not move.
//
// # Scrubbing
//
// Scrub verifies the frames of the sealed segments and of the durable
// part of the active one (below Flushed: those bytes never change again,
// while appends go on above them) from a frame boundary, for a byte
// budget per call, and reports what is invalid without changing anything;
// its caller (the store's scrubber) paces the calls and persists the
// position. A pass is done when it reaches the flushed offset. A frame
// whose CRC fails is reported with its extent and the walk goes on after
// it; a damaged header is reported with the rest of its segment (of the
// active segment: up to the flushed offset) as unverified, and the walk
// goes on at the next segment's base (always a frame start). Reading a mapped page whose device read fails raises
// SIGBUS; Scrub turns that into a reported ErrFault for the rest of the
// segment (runtime/debug.SetPanicOnFault) rather than a crash.
//
// # Repair
//
// SurveyDir walks every frame of every segment file read-only (the log
// must not be open) and lists the damaged ranges, each ending at a segment
// boundary, except a record frame whose header is intact but whose CRC
// fails when a valid frame follows it: that one frame is damaged in
// place, PatchDir only copies it to a .broken file, and Open passes over
// it when Options.Lost names it (recovery's one skip forward, for a frame
// a repair already gave up). PatchDir makes each other range a
// Blank-covered one: the non-zero bytes
// are copied to <segment>.broken first and zeroed, a file cut short is
// extended (fallocate), a Blank frame is written at the range's start, and
// missing segment files are recreated holding one Blank frame each. Every
// intact frame keeps its offset, and the log is contiguous again.
//
// Retention is decided by the caller: Segments lists the files and
// DeleteSegmentsBelow removes whole sealed segments. A segment's mapping is
// released only when no reader is inside it, so deleting under readers
// never raises SIGBUS.
package commitlog
