package consumequeue

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrentReadWrite runs one writer (with retention passes), a
// flusher, followers that read every entry as it is published, and random
// readers, under -race. Readers must never see a torn or foreign entry and
// never fault on a file that retention removed.
func TestConcurrentReadWrite(t *testing.T) {
	t.Parallel()
	const n = 4000
	q, _ := setup(t, 7)
	done := make(chan struct{})
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	var wg sync.WaitGroup

	wg.Go(func() { // the dispatcher
		defer close(done)
		for i := int64(0); i < n; i++ {
			if err := q.Put(i, entryFor(i)); err != nil {
				report(fmt.Errorf("put %d: %w", i, err))
				return
			}
			if i%400 == 399 {
				if _, err := q.DeleteBelowPhysical(entryFor(i - 200).CommitLogOffset); err != nil {
					report(fmt.Errorf("retention at %d: %w", i, err))
					return
				}
			}
		}
	})
	wg.Go(func() { // the flush service
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := q.Flush(); err != nil {
				report(fmt.Errorf("flush: %w", err))
				return
			}
			runtime.Gosched()
		}
	})
	for range 2 { // long-poll style followers
		wg.Go(func() {
			buf := make([]Entry, 32)
			for next := int64(0); next < n; {
				got, err := q.Read(next, buf)
				switch {
				case errors.Is(err, ErrOffsetOutOfRange):
					runtime.Gosched()
					continue
				case errors.Is(err, ErrOffsetTooSmall):
					next = q.MinOffset()
					continue
				case err != nil:
					report(fmt.Errorf("read %d: %w", next, err))
					return
				}
				for j := range got {
					if want := entryFor(next + int64(j)); buf[j] != want {
						report(fmt.Errorf("read %d: got %+v, want %+v", next+int64(j), buf[j], want))
						return
					}
				}
				next += int64(got)
			}
		})
	}
	wg.Go(func() { // random point reads
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-done:
				return
			default:
			}
			lo, hi := q.MinOffset(), q.MaxOffset()
			if hi <= lo {
				runtime.Gosched()
				continue
			}
			off := lo + rng.Int64N(hi-lo)
			e, err := q.Get(off)
			if errors.Is(err, ErrOffsetTooSmall) {
				continue // retention moved on between the loads and the read
			}
			if err != nil {
				report(fmt.Errorf("get %d: %w", off, err))
				return
			}
			if e != entryFor(off) {
				report(fmt.Errorf("get %d: got %+v, want %+v", off, e, entryFor(off)))
				return
			}
			if last, ok := q.LastEntry(); ok && last.CommitLogOffset < e.CommitLogOffset {
				report(fmt.Errorf("last entry %+v below entry %d", last, off))
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(n), q.MaxOffset())
	require.Equal(t, int64(n-201), q.MinOffset())
}
