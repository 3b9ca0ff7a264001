package broker

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Retry delays beyond the ladder. A failed delivery waits before its next
// attempt either at a delay level of the ladder (SCHEDULE_TOPIC_XXXX, the
// scheduler) or on a timer (rmq_sys_TIMER, timer.go): the retry copy is
// then a timer record whose destination is %RETRY%<group>, delivered there
// when due like any timer and carrying what every retry copy carries
// (reconsumeTimes, RETRY_TOPIC, ORIGIN_MESSAGE_ID, the attempt history).
// Which one, and how long:
//
//   - a nack's delayLevel > 0: that level;
//   - a nack's delay (delayMs): a timer of that length;
//   - otherwise (a nack without either, an expired lease, an orderly
//     message's in-place retry) the group's RetryPolicy: "levels" (the
//     default) is level 3 + reconsumeTimes, RocketMQ's ladder;
//     "exponential" is Initial·2^reconsumeTimes and "fixed" is Initial,
//     both capped at Max and then spread by ±Jitter of themselves
//     (uniformly), on a timer.
//
// Every delay lies in [1 ms, MaxRetryDelay]. retryMaxTimes still bounds
// the attempts: the copy of a message that used them up goes to the DLQ
// whatever the policy. Retry timers are system records: the
// --max-pending-timers quota, which bounds producers' timers, does not
// refuse them (they count in the pending total), and the timer listing
// shows them with their destination %RETRY%<group>; they can be
// rescheduled but not cancelled (which would drop the message without a
// dead letter).

// Backoff kinds of a RetryPolicy.
const (
	BackoffLevels      = "levels"
	BackoffExponential = "exponential"
	BackoffFixed       = "fixed"
)

// MaxRetryDelay bounds a nack's delay and every delay a RetryPolicy
// yields: RocketMQ's largest delay level (2 h).
const MaxRetryDelay = 2 * time.Hour

// normalizeRetryPolicy validates p and fills in its defaults; a policy of
// the ladder (nil, or backoff "" or "levels" with nothing else) is nil.
// Errors name the wire fields (retryPolicy.initialMs, …).
func normalizeRetryPolicy(p *RetryPolicy) (*RetryPolicy, error) {
	if p == nil {
		return nil, nil
	}
	out := *p
	switch out.Backoff {
	case "", BackoffLevels:
		if out.Initial != 0 || out.Max != 0 || out.Jitter != 0 {
			return nil, fmt.Errorf("%w: retryPolicy.initialMs, maxMs and jitter apply to the exponential and fixed backoffs, not to levels", ErrInvalidArgument)
		}
		return nil, nil
	case BackoffExponential, BackoffFixed:
	default:
		return nil, fmt.Errorf("%w: retryPolicy.backoff %s must be %q, %q or %q", ErrInvalidArgument, QuoteValue(out.Backoff), BackoffLevels, BackoffExponential, BackoffFixed)
	}
	maxMs := MaxRetryDelay.Milliseconds()
	switch {
	case out.Initial <= 0 || out.Initial > MaxRetryDelay:
		return nil, fmt.Errorf("%w: retryPolicy.initialMs must be 1..%d with backoff %s", ErrInvalidArgument, maxMs, out.Backoff)
	case out.Max < 0 || out.Max > MaxRetryDelay:
		return nil, fmt.Errorf("%w: retryPolicy.maxMs must be 0 (default %d) or initialMs..%d", ErrInvalidArgument, maxMs, maxMs)
	case out.Max != 0 && out.Max < out.Initial:
		return nil, fmt.Errorf("%w: retryPolicy.maxMs %d is below initialMs %d", ErrInvalidArgument, out.Max.Milliseconds(), out.Initial.Milliseconds())
	case !(out.Jitter >= 0 && out.Jitter <= 1): // also refuses NaN
		return nil, fmt.Errorf("%w: retryPolicy.jitter %v must be between 0 and 1", ErrInvalidArgument, out.Jitter)
	}
	if out.Max == 0 {
		out.Max = MaxRetryDelay
	}
	return &out, nil
}

// checkNackDelay validates a nack item's delay against its level.
func checkNackDelay(i int, level int, delay time.Duration) error {
	switch {
	case delay < 0 || delay > MaxRetryDelay:
		return fmt.Errorf("%w: items[%d].delayMs must be 1..%d", ErrInvalidArgument, i, MaxRetryDelay.Milliseconds())
	case delay > 0 && level != 0:
		return fmt.Errorf("%w: items[%d]: give delayLevel or delayMs, not both", ErrInvalidArgument, i)
	}
	return nil
}

// retryWait is how a delivery that failed after reconsume earlier
// failures waits for its next attempt: a ladder level (level > 0) or a
// timer of delay (delay > 0). An explicit level or delay (a nack's) wins
// over the group's policy p.
func (b *Broker) retryWait(p *RetryPolicy, reconsume int32, level int, delay time.Duration) (int, time.Duration) {
	levels := len(b.opts.DelayLevels)
	switch {
	case delay > 0:
		return 0, min(delay, MaxRetryDelay)
	case level > 0:
		return min(level, levels), 0
	case p == nil || p.Backoff == "" || p.Backoff == BackoffLevels:
		return min(3+int(max(reconsume, 0)), levels), 0
	}
	return 0, p.delay(reconsume, rand.Float64)
}

// delay is the policy's delay after reconsume earlier failures (the
// retry's attempt number less one), with jitter drawn from unit (uniform
// in [0, 1)).
func (p *RetryPolicy) delay(reconsume int32, unit func() float64) time.Duration {
	ceiling := p.Max
	if ceiling <= 0 || ceiling > MaxRetryDelay {
		ceiling = MaxRetryDelay
	}
	d := p.Initial
	if p.Backoff == BackoffExponential {
		for i := int32(0); i < reconsume && d < ceiling; i++ {
			d *= 2
		}
	}
	d = min(d, ceiling)
	if p.Jitter > 0 {
		d += time.Duration(float64(d) * p.Jitter * (2*unit() - 1))
	}
	return max(time.Millisecond, min(d, MaxRetryDelay))
}
