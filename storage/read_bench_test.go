package storage_test

import (
	"strconv"
	"strings"
	"testing"

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
