// Package timer is the timer family of the broker (delayed delivery at an
// arbitrary time: a send's delayMs or deliverAt, and retries waiting on a
// timer): the records of its two system topics with their codecs, and
// the State that following them keeps beside the timer index, with its
// apply.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"; receipt, retry, txn and dlq moved
// before it). It imports storage/message and server/broker/timerindex
// (applying a record makes the index's births and kills) of the module
// and nothing else, and server/broker imports it. The index itself, the
// on-disk order of the pending records by due time, is package
// timerindex's. What needs the broker stays there: following the two
// queues through the store into the State and the index, opening,
// checkpointing and rebuilding the index (timerfollow.go), the requests —
// a timer's send, listing, getting, cancelling and rescheduling timers,
// the Timer view they answer with, a topic's deletion cancelling its
// timers — the leader's delivery loop and retention's carry of pending
// timers (timer.go, timerdeliver.go), and the quota on pending timers.
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
// old-form copy, Legacy), and those the broker finds in the store (an
// Older: the newest copy by Key, the first record by its id). Neither
// reads the clock nor a random source: due times and settlement times
// travel inside the records (the request that writes a record chooses
// them), so every copy of the log makes the same index.
//
// # Memory only
//
// Not in any record: the old-form copies the State remembers (rebuilt
// whenever the index is, and forgotten once the broker has superseded
// each by a copy of today's form, ForgetLegacy), the earliest due time
// born since the delivery loop last looked (TakeBornDue), the records
// being delivered (Deliver, Delivered, Landed: Busy ones are invisible to
// listing, cancel and reschedule until the index sees their status), and
// those whose delivery failed with an unknown outcome (Unsure: their
// destination is searched by Key before they are delivered again). The
// broker keeps beside the State the index, its recovery report, how far
// it followed the queues, and the CommitLog's end at its open.
//
// # Locks
//
// State has none: the broker's timer lock guards it together with the
// index (every method is called under it). The broker's delivery lock,
// held by a delivery pass and by retention's last carry pass, comes
// before the topic gate and the timer lock; the timer lock comes after
// the gate and before the store. Their place among the broker's locks is
// in ARCHITECTURE.md.
package timer
