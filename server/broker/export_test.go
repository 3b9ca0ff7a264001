package broker

// TimerRecovery is how the timer index was opened (tests).
type TimerRecovery = timerRecovery

// TimerRecovered reports how the timer index was opened.
func (b *Broker) TimerRecovered() TimerRecovery {
	b.timers.mu.Lock()
	defer b.timers.mu.Unlock()
	return b.timers.recovered
}
