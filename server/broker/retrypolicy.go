package broker

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/mqgate/mqgate/server/broker/retry"
)

// The retry policy (package retry: which delay a failed delivery waits,
// on the ladder or on a timer, and the validation of a group's policy) is
// glued to the broker here: its errors become ErrInvalidArgument, the
// ladder's length is the broker's delay levels, the jitter is drawn here.

// RetryPolicy is a group's backoff between failed deliveries (package
// retry).
type RetryPolicy = retry.Policy

// Backoff kinds of a RetryPolicy.
const (
	BackoffLevels      = retry.BackoffLevels
	BackoffExponential = retry.BackoffExponential
	BackoffFixed       = retry.BackoffFixed
)

// MaxRetryDelay bounds a nack's delay and every delay a RetryPolicy
// yields: RocketMQ's largest delay level (2 h).
const MaxRetryDelay = retry.MaxDelay

// normalizeRetryPolicy validates p and fills in its defaults
// (retry.Normalize); a policy of the ladder is nil.
func normalizeRetryPolicy(p *RetryPolicy) (*RetryPolicy, error) {
	out, err := retry.Normalize(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return out, nil
}

// checkNackDelay validates a nack item's delay against its level.
func checkNackDelay(i int, level int, delay time.Duration) error {
	if err := retry.CheckNackDelay(i, level, delay); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return nil
}

// retryWait is how a delivery that failed after reconsume earlier
// failures waits for its next attempt (retry.Wait over the broker's delay
// levels): a ladder level (level > 0) or a timer of delay (delay > 0).
func (b *Broker) retryWait(p *RetryPolicy, reconsume int32, level int, delay time.Duration) (int, time.Duration) {
	return retry.Wait(p, len(b.opts.DelayLevels), reconsume, level, delay, rand.Float64)
}
