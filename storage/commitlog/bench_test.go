package commitlog

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage/internal/fileutil"
)

// Benchmarks compare the log against a plain os.File.Write loop with the
// same flush policy, so the engine's overhead reads as a ratio of MB/s:
//
//	go test -run x -bench . -benchmem -benchtime=2s ./storage/commitlog/
const (
	benchPayload = 1 << 10   // 1 KiB records
	benchSegment = 128 << 20 // 128 MiB segments
)

var benchAppenders = []int{1, 8, 64}

// runConcurrently performs ops operations spread over n goroutines.
func runConcurrently(b *testing.B, n, ops int, op func() error) {
	var left atomic.Int64
	left.Store(int64(ops))
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := op(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkAppend measures Append of 1 KiB records with 1, 8 and 64
// concurrent appenders in each flush mode.
func BenchmarkAppend(b *testing.B) {
	for _, mode := range flushModes {
		b.Run(mode.String(), func(b *testing.B) {
			for _, n := range benchAppenders {
				b.Run(strconv.Itoa(n), func(b *testing.B) {
					l, err := Open(Options{Dir: b.TempDir(), SegmentSize: benchSegment, FlushMode: mode})
					if err != nil {
						b.Fatal(err)
					}
					p := bytesPayload(make([]byte, benchPayload))
					b.SetBytes(benchPayload)
					b.ReportAllocs()
					b.ResetTimer()
					runConcurrently(b, n, b.N, func() error {
						_, err := l.Append(p)
						return err
					})
					b.StopTimer()
					if st := l.Stats(); mode == FlushSync && st.Flushes > 0 {
						b.ReportMetric(float64(st.Appends)/float64(st.Flushes), "records/flush")
					}
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				})
			}
		})
	}
}

// BenchmarkAppendSyncOneP measures FlushSync appends of 1 KiB records by
// 8 and 64 concurrent appenders with GOMAXPROCS=1 (a container limited to
// one CPU), and reports how many records each flush carried: with one P
// the flusher must still let every waiting appender into its group
// (gather), so the figure should be close to the number of appenders.
//
//	go test -run '^$' -bench AppendSyncOneP ./storage/commitlog/
func BenchmarkAppendSyncOneP(b *testing.B) {
	for _, n := range benchAppenders[1:] {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			l, err := Open(Options{Dir: b.TempDir(), SegmentSize: benchSegment, FlushMode: FlushSync})
			if err != nil {
				b.Fatal(err)
			}
			p := bytesPayload(make([]byte, benchPayload))
			b.SetBytes(benchPayload)
			b.ResetTimer()
			runConcurrently(b, n, b.N, func() error {
				_, err := l.Append(p)
				return err
			})
			b.StopTimer()
			st := l.Stats()
			b.ReportMetric(float64(st.Appends)/float64(max(st.Flushes, 1)), "records/flush")
			b.ReportMetric(float64(st.FlushTime.Microseconds())/float64(max(st.Flushes, 1)), "µs/flush")
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// rawWriter is the baseline: os.File.Write of 1 KiB blocks into a
// preallocated file under a mutex, with the same flush policy as the log
// (sync: a group-commit fdatasync shared by concurrent writers; async:
// fdatasync every 500 ms).
type rawWriter struct {
	f       *os.File
	mu      sync.Mutex
	written atomic.Int64
	synced  atomic.Int64
	syncMu  sync.Mutex
	cond    sync.Cond
	kick    chan struct{}
	stop    chan struct{}
	done    sync.WaitGroup
	failed  atomic.Bool
}

func newRawWriter(b *testing.B, mode FlushMode, size int64) *rawWriter {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	if err := fileutil.Preallocate(f, size); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	w := &rawWriter{f: f, kick: make(chan struct{}, 1), stop: make(chan struct{})}
	w.cond.L = &w.syncMu
	var tick <-chan time.Time
	if mode == FlushAsync {
		t := time.NewTicker(DefaultFlushInterval)
		tick = t.C
		defer func() { w.done.Go(func() { <-w.stop; t.Stop() }) }()
	}
	w.done.Go(func() {
		for {
			select {
			case <-w.stop:
				return
			case <-w.kick:
			case <-tick:
			}
			to := w.written.Load()
			if err := fileutil.Fdatasync(w.f); err != nil {
				w.failed.Store(true)
			}
			w.synced.Store(to)
			w.syncMu.Lock()
			w.cond.Broadcast()
			w.syncMu.Unlock()
		}
	})
	return w
}

func (w *rawWriter) write(block []byte, mode FlushMode) error {
	w.mu.Lock()
	if _, err := w.f.Write(block); err != nil {
		w.mu.Unlock()
		return err
	}
	end := w.written.Add(int64(len(block)))
	w.mu.Unlock()
	if mode == FlushAsync {
		return nil
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
	w.syncMu.Lock()
	for w.synced.Load() < end {
		w.cond.Wait()
	}
	w.syncMu.Unlock()
	return nil
}

func (w *rawWriter) close(b *testing.B) {
	close(w.stop)
	w.done.Wait()
	if w.failed.Load() {
		b.Error("fdatasync failed")
	}
	_ = w.f.Close()
}

// BenchmarkRawWrite is the baseline for BenchmarkAppend.
func BenchmarkRawWrite(b *testing.B) {
	for _, mode := range flushModes {
		b.Run(mode.String(), func(b *testing.B) {
			for _, n := range benchAppenders {
				b.Run(strconv.Itoa(n), func(b *testing.B) {
					w := newRawWriter(b, mode, int64(b.N)*benchPayload)
					block := make([]byte, benchPayload)
					b.SetBytes(benchPayload)
					b.ReportAllocs()
					b.ResetTimer()
					runConcurrently(b, n, b.N, func() error { return w.write(block, mode) })
					b.StopTimer()
					w.close(b)
				})
			}
		})
	}
}
