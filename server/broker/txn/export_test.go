package txn

import "time"

// RollBackExhausted is the roll-back loop's pass (tests call it directly).
func (s *Service) RollBackExhausted(now time.Time) (time.Time, error) {
	return s.rollBackExhausted(now)
}
