// Package dlq is the dead-letter family of the broker: the properties a
// dead letter carries, the status records of rmq_sys_DLQ with their codec,
// the status Table those records make, with its apply, the filter and
// cursor of a listing, and, since its requests moved here too, the family
// at work (Service): following rmq_sys_DLQ through the store into the
// Table (Follow, Apply), the view of a dead letter (View, Letter), the
// requests (List, Get, Lookup, Resend with its pacer, Discard), the
// projection feed the PostgreSQL mirror reads (Arrivals, StatusChanges)
// and retention's carry of dead letters (Carry). service.go is the table
// of contents: what the package needs of the store (Store) and of the
// broker (Config, Names), the Service.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry, txn, trace and
// progress moved before it).
//
// # Imports
//
// The storage facade (*storage.Store is its Store: the class of an
// append, a read's result, the store's sentinels a lookup tells apart)
// and storage/message; of the other families' packages retry (a letter's
// attempt history, which the view shows) and quote (a refused cursor's
// text). Never server/broker, any other package of server, api or cmd
// (internal/archtest): what it needs of the broker comes in its Config —
// the clock, the log, the broker's names (the retry topics' prefix, the
// attempt history's and an orderly message's properties), its sentinels
// (ErrInvalidArgument, ErrMessageNotFound) and the mapping of the store's
// errors, and as funcs the registry's word on a group and on a topic
// (GetGroup, GetTopic), the topic gate's read side, the base of every copy
// the broker writes (copyOf), which properties are the broker's own, and
// the message trace's note of a carried letter. server/broker fills it in
// (dlq.go there).
//
// # What stays in server/broker and why
//
//   - The facade (dlq.go, events.go): the exported requests, which check
//     that the broker is open and delegate; the public names as aliases
//     (DeadLetter, DLQFilter, ResendResult, DLQStatusChange, the DLQ*
//     statuses); the Config; the entry points the broker's other files
//     call (the replay at open, carryDeadLetters for retention.go) and
//     ProjectionSignals, which hands out the store's signals of two
//     streams, progress's and this family's.
//   - The follower's order (follow.go): the broker's follower calls
//     Follow after the registry, progress and the leases, before the cuts.
//   - The failure path that writes a dead letter: the retry family's
//     (package retry's Service.Write, fed by package consume's
//     send-back).
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
// a letter winning; a letter without one is Dead. Follow applies every
// record (Service.Apply: one that does not decode is logged and skipped)
// at open and on a follower, from where it stopped; a request applies its
// own records after appending them. Apply reads neither the clock nor
// anything else: a change's time is chosen by the request that writes the
// record and travels in it (At), so every copy of the log makes the same
// Table.
//
// # Listing
//
// A listing reads the group's dead-letter queue in order and keeps the
// letters a Filter matches (Filter.Match: original topic, death time
// range, a reason substring without regard to case, status), PageLimit at
// a time. Its cursor (ParseCursor, FormatCursor) is the decimal queue
// offset to go on from; List refuses one that does not parse
// (Config.InvalidArgument, the broker's ErrInvalidArgument).
//
// # Requests
//
// A listing and a lookup check the group (Config.Group). A resend names
// its letters by id or by a Filter (then only Dead ones, at most 10 000),
// and writes ResendChunk of them at a time, pausing 50 ms on the broker's
// clock between chunks (the resend pacer: about 5 000 letters a second,
// so a bulk resend cannot starve live traffic); each chunk, under the
// topic gate's read side and the change lock, checks each letter's status
// and original topic (Config.Topic), writes the letters' fresh copies to
// the group's retry topic (RetryPrefix+group: delivered again to that
// group only, RETRY_TOPIC the original topic, a reconsume count of 0,
// without the DLQ_ properties, the attempt history, UNIQ_KEY,
// MAX_RECONSUME_TIMES and ORDER_SEQ) in one batch with the chunk's status
// record, through the store's send class (refused at the send ceiling
// like sends), then applies the record. A discard writes its status
// record alone, through the system class (a status keeps a promise).
//
// # Memory only
//
// The Table is rebuilt from rmq_sys_DLQ at every open (no snapshot file).
// The Service keeps beside it how far it followed the topic, and the
// CommitLog offset below which every dead letter has been carried (a
// listing and a lookup skip what lies there; Carry raises it).
//
// # Locks
//
// The Service adds none: Follow's position is its callers' (the broker's
// open, then its follower under the follower's lock) and the carried mark
// is atomic. Table has two. Its change lock (LockChange) is held by a
// resend or a discard from reading a letter's status to applying the
// record it wrote, across the write, so that two racing requests never
// both decide on the same old status and the records reach the log in
// the order they are applied. It comes after the broker's topic gate (a
// resend holds the gate's read side, Config.Gate) and before the registry
// (a resend checks the original topic under it, Config.Topic) and the
// store. Carry takes neither, as before the move: retention calls it from
// one goroutine, and a letter resent or discarded after Carry read its
// status is carried all the same, its status record (keyed by the
// letter's id) applying to the copy too. The Table's own lock is taken
// inside each method and nothing is taken under it. Their place among
// the broker's locks is in ARCHITECTURE.md.
package dlq
