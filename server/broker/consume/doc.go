// Package consume is the consumer's side of the broker (RocketMQ 5's POP,
// SQS, Pub/Sub pull): the requests that decide across the state families
// — the registry, progress, the lease family's pop states, retry, the
// consumer instances, the filters and the store.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"), but it holds no record family of its
// own: what it decides is written as the families' records (lease records
// through package lease's Log, progress records through package
// progress's Ledger, retry and dead-letter copies through package retry's
// Service). It holds, in its Service:
//
//   - the map of pop states (Key to package lease's PopState, one per
//     progress group and topic: PopState, Existing, States, DropWhere),
//     under its own lock, which is never held while a pop state's lock is
//     taken;
//   - the queue views (view.go: View, ViewOf, ForInstance, WithSQL): one
//     queue a (group, topic) pops from, a queue of the topic or the
//     topic's view of the group's retry queue (RetryQueueID), with its
//     filters, an orderly group's order and a broadcasting group's
//     instance's in-place retries;
//   - the pull (pull.go: Pull, with its plan, the catch-up with the
//     dispatcher, the long poll, the queue reads, the filters and the
//     offsets they pass over marked consumed, the grants, which draw
//     epochs and sign receipts; GroupForPull, which an offset commit uses
//     too);
//   - offset commits (commit.go: CommitOffsets): the committed offset
//     written through progress's Ledger, and the queue's pop cursor reset
//     and its leases dropped, under the pop state's lock;
//   - the receipt loop (ack.go: Ack, ChangeLease, Nack): each receipt
//     decoded and checked before any lock is taken, then acted on under
//     its pop state's lock, a run of receipts of one (group, topic) under
//     one locking, and the lease records of the changes appended before
//     the lock is released; an ack's lease stays, marked settling, until
//     its progress record is durable;
//   - orderly groups (orderly.go): an ordered message's failure in place
//     and the re-offers of due and deferred messages;
//   - the send-back (sendback.go): failed deliveries handed to package
//     retry's write, their leases settled or offered again, and the lease
//     reaper (ReapExpired), a leader service;
//   - what the lease log asks of the pop states (leases.go): the leases
//     of a leader's snapshot (Live), where a folded lease is read and
//     whether it is still owed (OwedPlace), the install of the owed leases
//     when the broker takes over (Install);
//   - the requests' and results' types (types.go: PullRequest, Message,
//     ReceiptStatus, ReceiptResult, NackItem, LeaseItem), which
//     server/broker aliases.
//
// Every lease change is decided, written, then applied (changes.go). A
// request decides its changes under the pop state's lock, each a lease
// record's item with its epoch drawn and its deadline cut to the
// millisecond, as the answer and the record give it (a pull's grants,
// an ordered message failed in place by a nack or found expired, a lease
// changed: extended, waiting in place, released); a later message of a
// sharding key a pull is granting waits behind it, as behind a lease
// granted before. The changes are appended as one lease record before
// the lock is released — a pull's with the offsets its filters passed
// over — and only once appended applied to the cursors with package
// lease's PopState.Apply, the code that installs the folded leases when
// the broker takes over (Install). A write refused applies nothing (a
// pull's cursors go back to where it found them, and the next pull
// decides again); a receipt named twice in one request has the first's
// change appended and applied before the second is checked. What no
// record holds stays a move of package lease's, made under the lock
// (SendBack, StartSettling and EndSettling: claims the request settles
// itself; KeepHistory). An ordered
// message's (or an instance's) in-place attempt history is this package's
// to keep: lease holds it opaque (Lease.History), and historyOf reads it
// back as package retry's attempts, the only type it is ever set to.
//
// # Imports
//
// It sits above the state families in ARCHITECTURE.md's list: it imports
// registry, progress, lease, retry, instance, filter and receipt, the
// store's facade and its leaf packages (storage, storage/message,
// storage/offset); never server/broker, api, cmd, nor the replication
// layers under the store (internal/archtest). Only the facade imports it.
// What it needs of the broker comes in its Config, which server/broker
// fills in (consume.go there): the store, clock, logger, lease log, retry
// family and epoch counter, the options and sentinels, the filters'
// compilers (the broker checks a group's subscriptions with them too), a
// message as delivered, a request's client, a topic's retry floor, the
// retry policy's draw, the checks of a nack's reason and delay and the
// counters; and Config.Broker, the registry,
// the ledger and the instances, which the broker opens after making the
// Service.
//
// # Locks
//
// A pop state's lock (package lease's PopState) is taken by a pull across
// its reads, grants and the append of its record, by a receipt request
// across a run of receipts of one (group, topic) and the append of its
// notes, by the reaper across its scan of a pop state and by an offset
// commit across its write; one at a time, after the instances lock
// (a pull registers its instance before it pops), before the registry's
// read side, the progress locks and the store, and never with the lease
// log's fold lock. The map's lock is taken under a pop state's lock (a
// nack in place looks its pop state up: Existing) and never held while
// one is taken.
package consume
