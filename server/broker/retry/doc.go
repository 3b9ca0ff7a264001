// Package retry is the retry family of the broker: the consume-failure
// path's copies and their write, the retry policy — how long a failed
// delivery waits before its next attempt — with the validation of a
// group's policy and of a nack's delay, the attempt history a retry copy
// or dead letter carries (property ATTEMPTS, attempts.go: its codec and
// bounds; an attempt's time is the request's), the ladder's counts of
// what waits in the delay levels (ladder.go) and the scheduler's sink
// that drops what was scheduled for a topic deleted since.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"). It imports the store's facade and its
// leaf packages (storage, storage/message, storage/offset,
// storage/schedule) and server/broker/quote of the module, never the
// engines or the replication layers under the store, nor server/broker.
// registry (a group's Policy) and dlq (a letter's history) import it, so
// it imports neither: what the failure path needs of them — a group's
// name, retryMaxTimes and policy, a deleted topic's schedule offsets, the
// dead-letter properties' names (the reason; the consumer instance and the
// ordered message's sequence it marks a dead letter with) — and of the
// progress family (the entry ending a delivery, the record's append), the
// instance family (is a progress group still known, whose instance is
// it), the timer family (a retry on a timer is a timer record: Wrap, the
// due time's rounding) and the broker (the topic gate, whether a message's
// topic was deleted, a message's id, the store errors, the jitter's draw,
// the counters) comes in its Config, filled in by server/broker/retry.go.
// That is also why the attempt history stays here rather than in a leaf
// of its own: retry does not import dlq.
//
// What is elsewhere and why: the send-back, which takes the failed
// deliveries collected under the pop states' locks (a nack, an expired
// lease, an ordered message dead after its retries in place), hands them
// to Service.Write and then settles their leases, or makes the failures
// of a refused write visible again in their pop states, and the lease
// reaper, which walks the pop states, are package consume's (it sits
// above retry: server/broker/consume/doc.go); the jitter's draw stays in
// server/broker (retrypolicy.go), and so does a topic's deletion
// (topicdelete.go), which resets the ladder.
//
// # The write
//
// Service.Write holds the read side of the broker's topic gate
// (Config.Gate) while it reads each failed message (one gone meanwhile,
// by retention or its topic's deletion, is not copied; its delivery ends
// all the same), builds its copy — a retry on the ladder
// (SCHEDULE_TOPIC_XXXX, queue level-1, REAL_TOPIC %RETRY%<group>), a
// retry on a timer (Config.Timer: an rmq_sys_TIMER record whose
// destination is %RETRY%<group>) or a dead letter on %DLQ%<group> once the
// message used up the group's retryMaxTimes or the nack said -1 — and
// appends the copies with one rmq_sys_OFFSET record of failed entries
// (Config.Persist), in one batch. Every copy carries reconsumeTimes + 1,
// RETRY_TOPIC (the original topic), ORIGIN_MESSAGE_ID (the first copy's
// id), MAX_RECONSUME_TIMES and the bounded attempt history; it drops the
// dedup id, the delay and destination properties, a dead letter's reason
// and a committed transaction's id. Times are the Service's clock's, read
// once per write; the jitter is drawn by Config.Wait.
//
// # Locks
//
// The Ladder has one lock, held by a count across its reads of the store,
// the scheduler's positions and Config.ScheduleFloor (the registry's lock,
// taken under it), and by Reset. The Service adds none: Write and the
// sink hold the topic gate's read side and take, under it, the registry's
// lock, the instances lock (Known), the progress Ledger's (Persist) and
// the store's. Their place among the broker's locks is in
// ARCHITECTURE.md.
//
// # Which wait, and how long
//
// A failed delivery waits before its next attempt either at a delay level
// of the ladder (SCHEDULE_TOPIC_XXXX, the scheduler) or on a timer
// (rmq_sys_TIMER): the retry copy is then a timer record whose destination
// is %RETRY%<group>, delivered there when due like any timer and carrying
// what every retry copy carries (reconsumeTimes, RETRY_TOPIC,
// ORIGIN_MESSAGE_ID, the attempt history). Which one, and how long (Wait):
//
//   - a nack's delayLevel > 0: that level;
//   - a nack's delay (delayMs): a timer of that length;
//   - otherwise (a nack without either, an expired lease, an orderly
//     message's in-place retry) the group's Policy: "levels" (the
//     default, stored as no policy) is level 3 + reconsumeTimes,
//     RocketMQ's ladder; "exponential" is Initial·2^reconsumeTimes and
//     "fixed" is Initial, both capped at Max and then spread by ±Jitter of
//     themselves (uniformly), on a timer.
//
// Every delay lies in [1 ms, MaxDelay]. retryMaxTimes still bounds the
// attempts: the copy of a message that used them up goes to the DLQ
// whatever the policy. Retry timers are system records: the
// --max-pending-timers quota, which bounds producers' timers, does not
// refuse them (they count in the pending total), and the timer listing
// shows them with their destination %RETRY%<group>; they can be
// rescheduled but not cancelled (which would drop the message without a
// dead letter).
//
// # Records
//
// A Policy is stored in its group's rmq_sys_META record (server/broker/doc.go,
// "What the broker persists"); the delay it yields is drawn when the
// delivery fails and travels in the retry copy's timer record, so applying
// records never draws it again.
package retry
