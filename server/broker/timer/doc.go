// Package timer is the timer family of the broker (delayed delivery at an
// arbitrary time: a send's delayMs or deliverAt, and retries waiting on a
// timer): the records of its two system topics with their codecs, the
// State that following them keeps beside the timer index with its apply,
// and the Service at work on them — following the two queues through the
// store into the State and the index (opening, checkpointing and
// rebuilding the index), the requests (a timer's due time at a send,
// listing, getting, cancelling and rescheduling timers, the View they
// answer with, a topic's deletion cancelling its timers), the leader's
// delivery loop and retention's carry of pending timers.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry, txn and dlq moved
// before it). It imports, of the module, the store's facade (storage,
// storage/message), server/broker/timerindex (the index it holds) and
// internal/worker (the loop's backoff), and never server/broker: what it
// needs of the broker it is given in a Config (the store as the Store
// interface, the clock, the log, the options, the index's directory, the
// broker's sentinels, and as funcs the topic gate, the registry's word
// on a deleted topic, which properties are the broker's, the lateness
// counter and the trace's note of a carried record). server/broker
// imports it and keeps a facade (timer.go there): the exported requests,
// which delegate, Timer as an alias of View, the Config filled in from
// the broker, and the calls of the broker's other files — open and close
// (broker.go), the index's maintenance on every replica and the delivery
// loop among the leader-only services (leader.go), a follower's catch-up
// (follow.go), a send's due time and its stored timers (send.go), a retry
// put on a timer (retry.go), a topic's deletion (topicdelete.go),
// retention's carry (retention.go), a group's backlog (progress.go). The
// quota on pending timers stays in server/broker's quota.go with the
// other quotas (Pending is its count).
//
// # Records
//
// Both topics are written and read at queue 0 (server/broker/doc.go, "What
// the broker persists", describes them beside the other families' topics):
//
//   - Topic (rmq_sys_TIMER): a timer's first record is the message itself
//     (Wrap) with its destination in REAL_TOPIC and REAL_QID and its due
//     time in TIMER_DELIVER_MS (unix ms, rounded up: FormatDue); its
//     message id is the timer's id (ID, IDOffset). A reschedule, and a
//     carry past retention, append a copy (MarkCopy) due at its new time
//     that names the timer (PropID, and UNIQ_KEY Key(id), by which its
//     newest copy is found) and the queue offset of the record it
//     supersedes (PropPrev). A delivery copies the record to its
//     destination without the timer's properties (DeliveryDrops), with
//     UNIQ_KEY Key(id).
//   - StatusTopic (rmq_sys_TIMER_STATUS): each record's body is a JSON
//     array of StatusRecord {"id","status","at","seq","topic"}
//     (EncodeStatuses, StatusMessage, DecodeStatuses; Settle makes one),
//     status Delivered or Cancelled, settling the timer record at queue
//     offset seq, destined to topic. A delivery writes one record per
//     batch, in one batch with the delivered messages; a cancel one, a
//     topic's deletion one per chunk of its timers. DecodeStatuses checks
//     the JSON only: a record is applied as it was written.
//
// Records written before the timer index existed name timers by id only:
// a reschedule's copy had PropID and no PropPrev (nor UNIQ_KEY), a status
// entry no seq and no topic. They are still read.
//
// # Apply
//
// State.ApplyTimer and State.ApplyStatuses turn the records, in queue
// order, into a timerindex.Update: a birth per timer record (its due
// time, id, queue offset and destination), a kill per record a copy
// supersedes or a status entry settles. An old-form record kills every
// earlier record of its timer: the one the State remembers by id (an
// old-form copy, Legacy), and those the Service finds in the store (an
// Older: the newest copy by Key, the first record by its id). Neither
// reads the clock nor a random source: due times and settlement times
// travel inside the records (the request that writes a record chooses
// them), so every copy of the log makes the same index.
//
// # Requests and services
//
// Every request first brings the index up to date with what was stored
// before it (under the timer lock), and every writer stores its records,
// waits for their dispatch and follows them before it answers. A cancel
// writes a status record Cancelled (a retry waiting on a timer is
// refused: it is rescheduled, or its redelivery nacked to the dead
// letters); a reschedule a copy due at the new time; CancelTopic a status
// record per batch of a deleted topic's timers. Loop, the leader-only
// delivery loop, sleeps until the next due time (or a Nudge, or a second
// at most) and runs DeliverDue: the due messages and their status record
// Delivered in one batch, under the topic gate; a timer whose topic was
// deleted since it was scheduled is settled Cancelled instead; one that
// existed before the open or whose delivery failed is first looked up in
// its destination by Key (a crash may have stored its delivery and not
// its status). Carry copies, before retention deletes the CommitLog below
// a cut, every pending record there (the same id and due time). IndexLoop,
// on every replica, checkpoints the index and merges its runs.
//
// # Memory only
//
// Not in any record: the old-form copies the State remembers (rebuilt
// whenever the index is, and forgotten once the Service has superseded
// each by a copy of today's form, ForgetLegacy), the earliest due time
// born since the delivery loop last looked (TakeBornDue), the records
// being delivered (Deliver, Delivered, Landed: Busy ones are invisible to
// listing, cancel and reschedule until the index sees their status), and
// those whose delivery failed with an unknown outcome (Unsure: their
// destination is searched by Key before they are delivered again). The
// Service keeps beside the State the index, its recovery report (Recovery),
// how far it followed the queues, the CommitLog's end at its open and the
// delivery loop's wake-up signal.
//
// # Locks
//
// The Service has two. Its delivery lock, held by a delivery pass
// (DeliverDue) and by retention's last carry pass, comes first: before
// the topic gate, which a delivery takes to write (Config.Gate). Its timer
// lock guards the index, the State (which has no lock of its own) and the
// Service's fields; every request, following, the delivery's picking and
// settling, and each carry batch hold it. It comes after the topic gate
// (a topic's deletion, under the gate's write side, cancels its timers
// under it: CancelTopic) and before the store (following the queues reads
// it); under it only the index's own lock, the store's and, through
// Config.Carried, the trace follower's are taken. Their place among the
// broker's locks is in ARCHITECTURE.md.
package timer
