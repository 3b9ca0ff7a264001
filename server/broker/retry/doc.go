// Package retry is the retry family of the broker. Moved so far: the
// retry policy — how long a failed delivery waits before its next attempt
// — and the validation of a group's policy and of a nack's delay; and the
// attempt history a retry copy or dead letter carries (property ATTEMPTS,
// attempts.go: its codec and bounds; nothing there reads the clock, an
// attempt's time is the request's). The
// failure path itself (nack, lease expiry, the retry and dead-letter
// copies, their records) still lives in server/broker (retry.go,
// orderly.go; the dead letters' statuses and properties are package dlq's)
// until the family moves whole (ARCHITECTURE.md, "The broker
// as a state machine": the row of server/broker/retry).
//
// It imports nothing of the module but server/broker/quote, and server/broker imports it
// (retrypolicy.go there: broker.RetryPolicy is an alias of Policy, the
// errors become broker.ErrInvalidArgument, the number of delay levels is
// the broker's, and the jitter is drawn there).
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
