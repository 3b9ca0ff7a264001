package broker

import (
	"testing"
	"time"
)

// TestAwaitAppliedWaitsForPersists: AwaitApplied does not return while a
// progress record is between its append and its apply (persist holds
// progressMu shared across both), and returns once it is applied.
func TestAwaitAppliedWaitsForPersists(t *testing.T) {
	t.Parallel()
	b := &Broker{}
	b.progressMu.RLock() // a persist in flight
	done := make(chan struct{})
	go func() {
		b.AwaitApplied()
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("AwaitApplied returned while a record was appended but not applied")
	case <-time.After(100 * time.Millisecond):
	}
	b.progressMu.RUnlock() // applied
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AwaitApplied did not return after the record was applied")
	}
}
