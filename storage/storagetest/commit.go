package storagetest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage"
)

// FollowWrites stands in for the Raft commit point of a replicated store
// (Options.Replicated with HoldDispatch): every millisecond it moves the
// dispatch limit, which is the commit point, to the end of the log —
// except while the returned flag is set, when writes wait for their
// commit. It stops when the test ends.
func FollowWrites(t testing.TB, st *storage.Store) (hold *atomic.Bool) {
	t.Helper()
	hold = new(atomic.Bool)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if !hold.Load() {
				st.SetDispatchLimit(st.WriteOffset())
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return hold
}
