// Package trace is the message trace's record family (RocketMQ's message
// trace, as a query): the codec of the rmq_sys_TRACE records (record.go),
// the event kinds (part of the on-disk format) and the index keys the
// records are found by; the query that lists a message's life from the
// records the broker writes anyway (query.go); the follower, the
// leader-only service that reads the lease and progress records and
// appends their events, with the push outcomes, as trace records
// (follow.go); and retention's carry of the traces of the lives it
// carries past a cut (carry.go). tracer.go is the table of contents:
// Config, what the package needs of the store (Store) and of the broker
// (Broker), the Tracer and its counters.
//
// It is a package of the broker's split by record family
// (ARCHITECTURE.md, "The broker as a state machine"). It imports the
// storage facade (*storage.Store is its Store) and storage's leaf
// packages message, offset (the progress records it follows) and
// schedule (a parked entry's UNIQ_KEY); the other families' leaf packages
// whose records a trace reads: lease (the lease records), dlq, timer and
// txn (their topics, keys and properties), retry (the attempt history),
// receipt (a push outcome names its lease by receipt) and quote; and
// internal/worker (the follower's backoff). Never server/broker: what it
// needs of the broker it declares as Broker — which topics are
// bookkeeping and which messages belong to a deleted topic, the id a
// message is known by, a schedule entry's key, a dead letter's status,
// the receipt keyring of the moment, the wait for dispatch, how a store
// error is reported — and the broker's names it reads in records (Names).
//
// What stays in server/broker (trace.go): the public names (MessageTrace,
// TraceEvent and TraceStats are aliases of this package's types, the
// Trace* constants of its Type* ones), the facade methods Trace,
// TraceStats and TracePushed, the Tracer's construction at open, its
// Resume at Promote (server/broker's follow.go), starting Run among the
// leader-only services (leader.go) and the calls of retention
// (retention.go, dlq.go; timer.go's Config.Carried) into NoteCarried,
// NoteLivesBelow and Carry. The broker turns ErrNoMessage into its
// ErrMessageNotFound; every other error is already the broker's
// (Broker.StoreErr).
//
// # Locks
//
// A Tracer has one lock, the follower's: it guards the published
// positions, the push outcomes waiting, and the lives noted for a carry.
// It is held only around those fields, never across a store call, and
// nothing is taken under it; in the broker's lock order it comes last
// among the families, before the store (a timer carry notes its lives
// under the timer lock, server/broker/timer/doc.go). The follower's read
// positions belong to its goroutine (and to Resume, which runs before the
// goroutine starts).
package trace
