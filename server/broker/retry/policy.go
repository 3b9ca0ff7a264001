package retry

import (
	"errors"
	"fmt"
	"time"

	"github.com/mqgate/mqgate/server/broker/quote"
)

// Backoff kinds of a Policy.
const (
	BackoffLevels      = "levels"
	BackoffExponential = "exponential"
	BackoffFixed       = "fixed"
)

// MaxDelay bounds a nack's delay and every delay a Policy yields:
// RocketMQ's largest delay level (2 h).
const MaxDelay = 2 * time.Hour

// Policy is a group's backoff between failed deliveries. It is stored in
// the group's registry record under its Go field names
// ({"Backoff","Initial","Max","Jitter"}, durations in nanoseconds; part of
// the on-disk format).
type Policy struct {
	// Backoff is BackoffExponential or BackoffFixed (a policy of
	// BackoffLevels is stored as nil).
	Backoff string
	// Initial is the first retry's delay (and every retry's, fixed).
	Initial time.Duration
	// Max caps the delay before jitter (default and at most MaxDelay).
	Max time.Duration
	// Jitter (0..1) spreads each delay over ±Jitter of itself.
	Jitter float64 `json:",omitempty"`
}

// Normalize validates p and fills in its defaults; a policy of the ladder
// (nil, or backoff "" or "levels" with nothing else) is nil. Errors name
// the wire fields (retryPolicy.initialMs, …); the broker reports them as
// invalid arguments.
func Normalize(p *Policy) (*Policy, error) {
	if p == nil {
		return nil, nil
	}
	out := *p
	switch out.Backoff {
	case "", BackoffLevels:
		if out.Initial != 0 || out.Max != 0 || out.Jitter != 0 {
			return nil, errors.New("retryPolicy.initialMs, maxMs and jitter apply to the exponential and fixed backoffs, not to levels")
		}
		return nil, nil
	case BackoffExponential, BackoffFixed:
	default:
		return nil, fmt.Errorf("retryPolicy.backoff %s must be %q, %q or %q", quote.Value(out.Backoff), BackoffLevels, BackoffExponential, BackoffFixed)
	}
	maxMs := MaxDelay.Milliseconds()
	switch {
	case out.Initial <= 0 || out.Initial > MaxDelay:
		return nil, fmt.Errorf("retryPolicy.initialMs must be 1..%d with backoff %s", maxMs, out.Backoff)
	case out.Max < 0 || out.Max > MaxDelay:
		return nil, fmt.Errorf("retryPolicy.maxMs must be 0 (default %d) or initialMs..%d", maxMs, maxMs)
	case out.Max != 0 && out.Max < out.Initial:
		return nil, fmt.Errorf("retryPolicy.maxMs %d is below initialMs %d", out.Max.Milliseconds(), out.Initial.Milliseconds())
	case !(out.Jitter >= 0 && out.Jitter <= 1): // also refuses NaN
		return nil, fmt.Errorf("retryPolicy.jitter %v must be between 0 and 1", out.Jitter)
	}
	if out.Max == 0 {
		out.Max = MaxDelay
	}
	return &out, nil
}

// CheckNackDelay validates the delay of a nack's item i against its
// level; the broker reports the error as an invalid argument.
func CheckNackDelay(i int, level int, delay time.Duration) error {
	switch {
	case delay < 0 || delay > MaxDelay:
		return fmt.Errorf("items[%d].delayMs must be 1..%d", i, MaxDelay.Milliseconds())
	case delay > 0 && level != 0:
		return fmt.Errorf("items[%d]: give delayLevel or delayMs, not both", i)
	}
	return nil
}

// Wait is how a delivery that failed after reconsume earlier failures
// waits for its next attempt: a ladder level (level > 0, at most levels,
// the number of delay levels) or a timer of delay (delay > 0). An explicit
// level or delay (a nack's) wins over the group's policy p; unit draws the
// jitter (uniform in [0, 1)) and is called only for a policy with a
// backoff of its own.
func Wait(p *Policy, levels int, reconsume int32, level int, delay time.Duration, unit func() float64) (int, time.Duration) {
	switch {
	case delay > 0:
		return 0, min(delay, MaxDelay)
	case level > 0:
		return min(level, levels), 0
	case p == nil || p.Backoff == "" || p.Backoff == BackoffLevels:
		return min(3+int(max(reconsume, 0)), levels), 0
	}
	return 0, p.Delay(reconsume, unit)
}

// Delay is the policy's delay after reconsume earlier failures (the
// retry's attempt number less one), with jitter drawn from unit (uniform
// in [0, 1)).
func (p *Policy) Delay(reconsume int32, unit func() float64) time.Duration {
	ceiling := p.Max
	if ceiling <= 0 || ceiling > MaxDelay {
		ceiling = MaxDelay
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
	return max(time.Millisecond, min(d, MaxDelay))
}
