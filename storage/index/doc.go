// Package index is mqgate's hash index by message key: RocketMQ's IndexFile,
// a hash table laid out in fixed-size, preallocated, memory-mapped files, so
// that memory stays bounded whatever the number of messages.
//
// The store's dispatcher calls Add for every key of every message (the key
// bytes are composed by the caller, e.g. "topic\x00<kind><key>"); admin
// queries call Lookup, which returns candidate CommitLog offsets whose key
// hash matches. The caller verifies the real key against the message read
// from the CommitLog, so a hash collision only costs a read. The index is
// derived data: everything in it can be rebuilt from the CommitLog, and
// after a crash the store re-adds every message above MaxPhysicalOffset.
//
// # Files
//
// All files live directly in Options.Dir:
//
//	00000001718000000000         an index file; the name is its base timestamp
//	00000001718000000000.tmp     a file being created (removed on Open)
//	00000001718000000000.broken  a quarantined file (never deleted by the index)
//
// A file is named by its base timestamp (unix milliseconds, %020d): the
// store timestamp of the first key added to it, raised when needed to one
// more than the previous file's base, so names are unique and lexical order
// is age order. Entries record their time relative to the base. Any other
// name in the directory is ignored.
//
// A file is a header region, a slot table and an entry array:
//
//	off                          len               what
//	0                            HeaderRegionSize  header copy A at 0, copy B at HeaderCopyOffset
//	HeaderRegionSize             4*slotCount       slots
//	HeaderRegionSize+4*slotCount EntrySize*cap     entries 1..cap
//
// Its length is HeaderRegionSize + 4*slotCount + EntrySize*entryCapacity
// exactly (fallocate'd, so unwritten parts read as zeros; see "Geometry of
// new files" for their sizes); slotCount and entryCapacity come from the
// file's own header, so files written under other Options stay readable.
// A file longer than that is accepted (only the prefix is mapped); a
// shorter one is broken.
//
// # Geometry of new files
//
// Options.SlotCount and Options.EntryCount are the geometry a file grows
// to, not the size of every file: an index starts small and each new file
// is four times its predecessor, so a store with a few messages does not
// pay for a full file (84 MB with the store's defaults). The first file of
// an empty index gets max(SlotCount/64, 256) slots and max(EntryCount/64,
// 1024) entries (never more than the Options); each file created by a roll
// gets four times the previous file's slots and entries, capped at the
// Options. The sequence is deterministic, so a file whose header copies are
// both lost still has its geometry found among the sequence's sizes (see
// Recovery). Every file's geometry is in its own header, as before, so files
// of full size written by earlier versions open unchanged: this changes
// which sizes new files get, not the layout.
//
// # Header
//
// Integers are big-endian. The header is stored twice, copy A at offset 0
// and copy B at offset HeaderCopyOffset (512: another disk sector), each
// HeaderSize bytes; the rest of the header region is zero:
//
//	off len field
//	0   4   magic            uint32  Magic 0x4D514958 ("MQIX")
//	4   2   version          uint16  Version 1
//	6   2   flags            uint16  bit 0 FlagClean, bit 1 FlagSealed; other bits zero
//	8   4   slotCount        uint32  number of slots, >= 1
//	12  4   entryCapacity    uint32  number of entries the file holds, >= 1
//	16  8   generation       uint64  incremented by every header write
//	24  8   baseTimestamp    int64   unix ms; equals the file name; origin of timeDiff
//	32  8   beginTimestamp   int64   smallest store timestamp of entries 1..entryCount (0 when empty)
//	40  8   endTimestamp     int64   largest store timestamp of entries 1..entryCount (0 when empty)
//	48  8   beginPhyOffset   int64   phyOffset of entry 1 (-1 when empty)
//	56  8   endPhyOffset     int64   phyOffset of entry entryCount (-1 when empty)
//	64  8   indexedPhyOffset int64   every key of every message at or below it is in this file or an older one (-1: none)
//	72  4   slotsUsed        uint32  non-empty slots among those of entries 1..entryCount
//	76  4   entryCount       uint32  entries 1..entryCount are valid, <= entryCapacity
//	80  4   crc              uint32  CRC-32C (Castagnoli) of bytes [0,80) of this copy
//
// FlagClean means the slot table is exactly the one built from entries
// 1..entryCount (the file was closed or sealed after a full msync). FlagSealed
// means the file is finished and is never written again.
//
// A header write (Flush, Close, roll, the first Add after Open) writes copy
// A, msyncs the page, then writes copy B and msyncs again, so at every
// instant at least one copy holds a complete, durable header. Open uses the
// valid copy (magic, version, CRC, sane fields, base = file name) with the
// highest generation.
//
// # Slots and entries
//
// A key hashes to keyHash = CRC-32C(key), with 0 replaced by 1 (so a valid
// entry is never all zeros), and to slot keyHash % slotCount. Slot k is a
// uint32 at HeaderRegionSize + 4*k: the number of the newest entry of that
// slot's chain, 0 when empty. Entry i (1-based) is EntrySize (20) bytes at
// HeaderRegionSize + 4*slotCount + EntrySize*(i-1):
//
//	off len field
//	0   4   keyHash   uint32  never 0
//	4   8   phyOffset int64   CommitLog offset of the message, >= 0
//	12  4   timeDiff  int32   store timestamp - baseTimestamp, milliseconds (may be negative)
//	16  4   prevEntry uint32  previous (older) entry of the same slot, 0 = end of chain; < i
//
// Entries are appended in Add order, so phyOffset never decreases with i
// (several consecutive entries may share one phyOffset: the keys of one
// message) and a chain runs newest to oldest. A timestamp more than about
// 24.8 days (int32 milliseconds) from the base starts a new file.
//
// # Lifecycle
//
// Add appends entry i (prevEntry = the slot's current head), then sets the
// slot to i. Only one goroutine adds; Lookup runs concurrently and reads
// slot heads with atomic loads (entries are written before the slot that
// publishes them, and are never rewritten while linked). A full file (or a
// timestamp out of timeDiff range) is sealed — msync of slots and entries,
// then a header with FlagClean|FlagSealed — and a new file is created as
// name.tmp, fallocate'd, its header written, fdatasync'd, renamed and the
// directory fsync'd; only then is it mapped.
//
// Before the first Add into a file after Open, a header without FlagClean is
// made durable, so a crash can never leave a file that claims a clean slot
// table that writes have since changed. Flush msyncs slots and entries, then
// writes the header (entryCount, statistics and indexedPhyOffset) — the
// header never claims more than is on disk. Because the keys of one message
// arrive in separate Adds, Flush records as indexedPhyOffset only the
// offsets below the one being added; Close (called after the last Add)
// records the last one too and sets FlagClean.
//
// # Recovery (Open)
//
// Open removes *.tmp files and reads every file's header. After a crash the
// mapped file may hold writes newer than its last durable header, in any
// page order, so Open trusts only entries 1..entryCount of that header:
//
//   - A file with FlagClean is used as is (its slots are trusted; Lookup
//     still bounds every link by entryCount and requires prevEntry < i).
//   - The newest file without FlagClean gets its slot table rebuilt from
//     entries 1..entryCount, checking every entry (keyHash != 0, phyOffset
//     >= 0 and non-decreasing, prevEntry equal to the slot head being
//     rebuilt); entries from the first invalid one on are dropped, and so are
//     trailing entries above indexedPhyOffset (a message whose keys may be
//     incomplete). MaxPhysicalOffset is the resulting indexedPhyOffset; the
//     store re-adds every message above it.
//   - A file with no valid header copy is rebuilt the same way if its
//     geometry can be found (Options, a size of the growth sequence, or
//     another file's header, whose size matches the file's length): its
//     base comes from its name and its entries are scanned from 1 with the
//     checks above. If it is the newest file, its last message counts as
//     incomplete and is dropped; if it is not and holds no valid entry (a
//     zeroed file: a file is created by its first Add), every newer file is
//     quarantined, and the store re-adds everything. Without a geometry it
//     is renamed to *.broken and logged.
//   - A file shorter than its geometry, or whose first offset is below the
//     previous file's endPhyOffset, is quarantined.
//   - Files form a prefix: if a file must be quarantined, or an older file
//     lacks FlagClean, or the scan of an older file hits an invalid
//     (non-zero) entry, every newer file is quarantined too (renamed
//     *.broken), so the index never has a hole below MaxPhysicalOffset.
//
// A rebuilt file is msynced and gets a fresh header — FlagClean, plus
// FlagSealed unless it is the newest file — before any new Add overwrites
// the entries it dropped.
//
// # Retention
//
// DeleteBelow removes whole files whose endPhyOffset is below the new
// CommitLog minimum, never the newest one. Files are reference-counted:
// a Lookup in progress keeps its files mapped, and a deleted file is
// unmapped when its last reader is done, so readers never fault.
package index
