package consume

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/retry"
)

// The receipt loop's way into the send-back while the loop is still
// server/broker's (ack.go there).

// SendBack is one leased message that failed.
type SendBack = sendBack

// FailInPlace records a failed delivery of an ordered (or an instance's)
// lease: failInPlace.
func (s *Service) FailInPlace(l *lease.Lease, v View, level int, delay time.Duration, now time.Time, a retry.Attempt) bool {
	return s.failInPlace(l, v, level, delay, now, a)
}

// DeadInPlace is the send-back of an ordered message that used up its
// retries: deadInPlace.
func DeadInPlace(v View, off int64, l *lease.Lease, reason, outcome, client string) SendBack {
	return deadInPlace(v, off, l, reason, outcome, client)
}

// NackBack is the send-back of a nacked lease.
func NackBack(v View, off int64, level int, delay time.Duration, reason, client string, l *lease.Lease) SendBack {
	return sendBack{view: v, offset: off, level: level, delay: delay, reason: reason, outcome: retry.OutcomeNack, client: client, lease: l}
}

// SendBack writes the copies of failed deliveries and settles their
// leases: sendBack.
func (s *Service) SendBack(group string, items []SendBack) error { return s.sendBack(group, items) }
