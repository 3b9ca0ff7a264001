// Package dlq is the dead-letter family of the broker: the properties a
// dead letter carries, the status records of rmq_sys_DLQ with their codec,
// the status Table those records make, with its apply, and the filter and
// cursor of a listing.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry and txn moved before
// it). It imports storage/message of the module and nothing else, and
// server/broker imports it. What needs the broker stays there (dlq.go):
// following rmq_sys_DLQ through the store into the Table (at open and on a
// follower: replayDLQStatuses, follow.go), the requests — listing a
// group's dead letters, getting one, resending and discarding them, with
// the DeadLetter view they answer with (it holds the retry family's
// attempt history and the broker's received-message properties) — the
// resend pacer, retention's carry of dead letters (carryDeadLetters) and
// the projection feed (events.go). The failure path that writes a dead
// letter is the retry family's, still in server/broker (retry.go).
//
// # Records
//
// server/broker/doc.go ("What the broker persists") describes both topics
// beside the other families' and the properties among the broker's own:
//
//   - %DLQ%<group> (Topic, TopicPrefix), queue 0: a group's dead letters,
//     each a copy of the message that used up its attempts, with its
//     original topic in RETRY_TOPIC, ORIGIN_MESSAGE_ID, the attempt
//     history and PropReason. A dead letter is known by StableID, its first
//     copy's message id. Before retention deletes the segment of one still
//     Dead, the broker re-appends it, marked by MarkCarried: PropID (its
//     id), PropDeadAt (its first copy's store time, which DeadAt reads) and
//     UNIQ_KEY Key(id), by which a lookup finds it.
//   - StatusTopic (rmq_sys_DLQ), queue 0: each record's body is a JSON array
//     of StatusRecord {"group","messageId","status","at"} (EncodeStatuses,
//     StatusMessage, DecodeStatuses), a letter moving to Resent or
//     Discarded. A request writes the records of one resend chunk or one
//     discard in one batch (a resend with the letters' fresh copies on
//     %RETRY%<group>). DecodeStatuses checks the JSON only: a record is
//     applied as it was written.
//
// # Apply
//
// Table.Apply applies decoded records in log order, the newest record of
// a letter winning; a letter without one is Dead. The broker calls it for
// every record at open and on a follower, and on the leader after
// appending its own. It reads neither the clock nor anything else: a
// change's time is chosen by the request that writes the record and
// travels in it (At), so every copy of the log makes the same Table.
//
// # Listing
//
// A listing reads the group's dead-letter queue in order and keeps the
// letters a Filter matches (Filter.Match: original topic, death time
// range, a reason substring without regard to case, status), PageLimit at
// a time. Its cursor (ParseCursor, FormatCursor) is the decimal queue
// offset to go on from; the broker refuses one that does not parse as
// ErrInvalidArgument.
//
// # Memory only
//
// The Table is rebuilt from rmq_sys_DLQ at every open (no snapshot file).
// The broker keeps beside it how far it followed the topic, and the
// CommitLog offset below which every dead letter has been carried (a
// listing skips the copies there).
//
// # Locks
//
// Table has two. Its change lock (LockChange) is held by a resend or a
// discard from reading a letter's status to applying the record it wrote,
// across the write, so that two racing requests never both decide on the
// same old status and the records reach the log in the order they are
// applied. It comes after the broker's topic gate (a resend holds the
// gate) and before the registry (a resend checks the original topic under
// it) and the store. The Table's own lock is taken inside each method
// and nothing is taken under it. Their place among the broker's locks is
// in ARCHITECTURE.md.
package dlq
