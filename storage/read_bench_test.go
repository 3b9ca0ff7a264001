package storage_test

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// BenchmarkReadQueue measures a consumer's read path: ReadQueue of batches
// of 32 messages of 1 KiB and 64 KiB bodies, through the ConsumeQueue, the
// CommitLog frame check and the payload decoder:
//
//	go test -run x -bench ReadQueue -benchmem ./storage/
func BenchmarkReadQueue(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			opts := storagetest.SmallOptions(b.TempDir())
			opts.SegmentSize = 64 << 20
			opts.MaxMessageSize = 128 << 10
			opts.QueueEntriesPerFile = 4096
			opts.FlushMode = storage.FlushAsync
			s := storagetest.MustOpen(b, opts)
			body := strings.Repeat("x", size)
			const n = 512
			for range n {
				storagetest.MustPut(b, s, storagetest.NewMessage("bench", 0, body, "tag"))
			}
			for s.MaxOffset("bench", 0) < n {
				<-s.NewDataSignal("bench")
			}
			b.SetBytes(int64(size) * 32)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				res, err := s.ReadQueue("bench", 0, int64(i*32%n), 32, nil)
				if err != nil || len(res.Messages) != 32 {
					b.Fatalf("read: %d messages, %v", len(res.Messages), err)
				}
			}
		})
	}
}

// BenchmarkScrubberPass measures the scrubber worker as it runs in a
// server: a pass over 128 MiB of sealed segments at the default 16 MiB/s,
// reporting the achieved rate and the process CPU time during the pass
// and, for comparison, during 3 s after it (per cent of one core; the
// store is otherwise idle). Run it once:
//
//	go test -run x -bench ScrubberPass -benchtime 1x ./storage/
func BenchmarkScrubberPass(b *testing.B) {
	opts := storagetest.SmallOptions(b.TempDir())
	opts.SegmentSize = 16 << 20
	opts.MaxMessageSize = 128 << 10
	opts.FlushMode = storage.FlushAsync
	opts.ScrubRate = -1
	s := storagetest.MustOpen(b, opts)
	body := strings.Repeat("x", 64<<10)
	for s.Stats().CommitLogMax < 128<<20+opts.SegmentSize {
		storagetest.MustPut(b, s, storagetest.NewMessage("bench", 0, body, ""))
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		storagetest.RemoveScrubProgress(b, opts.Dir)
		opts.ScrubRate = 0 // the default rate
		s := storagetest.MustOpen(b, opts)
		cpu0, start := processCPU(b), time.Now()
		for s.ScrubStatus().Passes == 0 {
			time.Sleep(50 * time.Millisecond) // a benchmark's sampling period, not a test's wait
		}
		wall, cpu := time.Since(start), processCPU(b)-cpu0
		st := s.ScrubStatus()
		b.ReportMetric(float64(st.BytesVerified)/wall.Seconds()/(1<<20), "MiB/s")
		b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%cpu")
		b.ReportMetric(100*st.Busy.Seconds()/wall.Seconds(), "%busy")
		// The same process between passes, for comparison.
		cpu0, start = processCPU(b), time.Now()
		time.Sleep(3 * time.Second)
		b.ReportMetric(100*(processCPU(b)-cpu0).Seconds()/time.Since(start).Seconds(), "%cpu-idle")
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// processCPU is the user+system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
