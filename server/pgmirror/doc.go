// Package pgmirror projects mqgate's consumer progress and dead letters
// into PostgreSQL, for dashboards, SQL users and disaster recovery.
//
// The CommitLog stays the source of truth. The mirror follows three kinds
// of system stream through the broker's projection feeds (package
// server/broker, events.go), never through in-memory callbacks that a
// crash would forget:
//
//	stream name   broker feed                      derived rows
//	offsets       OffsetRecords (acks, commits)    consumer_offsets
//	dlq_status    DeadLetterStatusChanges          dead_letters.status
//	dlq:<group>   DeadLetterArrivals(group)        dead_letters
//
// Nothing on the send, pull or ack path waits for PostgreSQL: the broker
// appends to its log as if the mirror did not exist, and one writer
// goroutine (Mirror.Start) follows behind.
//
// # Exactly-once
//
// Each pass reads a bounded batch from every stream starting at its
// cursor, folds it into the projection (only the newest state of each key
// is written: coalescing), and writes the rows and the new cursors in ONE
// transaction. The cursors (table mirror_cursors) are the next stream
// offset to read, so after a crash of either side, or a commit whose
// outcome is unknown, the mirror reloads cursors and state from
// PostgreSQL and continues from exactly where the last committed
// transaction ended: nothing is lost and nothing applied twice. A cursor
// is moved with a compare-and-set (UPDATE … WHERE position = old), so a
// second writer on the same schema makes the pass fail instead of
// interleaving.
//
// The mirror is never ahead of the log by construction: it only writes
// what it has read from the log, and a cursor never passes the records it
// covers.
//
// # Consumer offsets
//
// consumer_offsets holds, per (group, topic, queue), the full state of the
// broker's offset state machine (package storage/offset) as of the
// 'offsets' cursor: committed offset, generation and the acknowledged
// offsets above the committed one. That makes the projection exact after
// a restart: the mirror loads the table and re-applies records from its
// cursor, with the same rules as offset.Table (see progress.go). Queue id
// -1 is a topic's view of the group's %RETRY% topic and is mirrored like
// any other queue. A broadcasting group's consumer instances have rows of
// their own, client_id naming the instance (X-Mqgate-Client-Id; empty for
// the group's own rows): the broker keys them "<group>@<client id>"
// (package storage/offset), the mirror splits that into the two columns.
// An instance forgotten for idleness loses its rows with its forget
// record; a deleted group loses its own and its instances'.
//
// If retention has deleted progress records the mirror never read (it was
// away longer than the retention window), or the mirror starts empty over
// a log whose first records are gone, it re-seeds from the broker's live
// progress (Progress) and marks those rows exact=false: from then on they
// follow the live committed offset until the key's next explicit commit
// makes them exact again.
//
// # Dead letters
//
// dead_letters has one row per (group, dead-letter message id) with the
// failure history, keyed for the admin listing by dlq_offset (the queue
// offset in %DLQ%<group>, the same cursor the broker's own listing uses).
// Status changes (resent, discarded) come from their own stream and are
// upserts: if one is mirrored before its arrival (the two streams are
// read separately), it creates a row with dead_at NULL that the arrival
// completes; such rows are not listed.
//
// # Schema
//
// The schema is in package migrations (golang-migrate pairs, embedded),
// applied by Open ("up") and by `mqgate migrate up|down|version` through
// Migrate. golang-migrate keeps its version in mqgate_schema_migrations.
//
// # Outages
//
// When PostgreSQL is down or slow, a pass fails (each is bounded by
// Config.PassTimeout), the mirror reports itself degraded (Health, Stats)
// and retries with exponential backoff; the log keeps growing and the next
// successful passes catch up from the cursors.
//
// # Recovery
//
// SeedOffsets commits the mirrored offsets into a fresh or restored data
// dir (forward only, clamped to what the log holds) and then resets the
// offsets projection so that it follows the new log. A consumer
// instance's offsets go to that instance of its group, which must exist
// there as a broadcasting group (the mirror does not know a group's mode;
// otherwise they are skipped, and logged).
package pgmirror
