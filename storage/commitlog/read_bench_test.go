package commitlog

import (
	"strconv"
	"testing"
)

// BenchmarkRead measures Read of 1 KiB and 64 KiB records that are in the
// page cache (the common case: consumers read recent data), so the figure
// is the cost of validating and copying a frame, CRC included:
//
//	go test -run x -bench 'Read$' -benchmem ./storage/commitlog/
func BenchmarkRead(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			l, err := Open(Options{Dir: b.TempDir(), SegmentSize: 64 << 20, FlushMode: FlushAsync})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			p := bytesPayload(make([]byte, size))
			var offsets []int64
			for written := 0; written < 32<<20; written += size {
				res, err := l.Append(p)
				if err != nil {
					b.Fatal(err)
				}
				offsets = append(offsets, res.Offset)
			}
			buf := make([]byte, 0, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				rec, err := l.Read(offsets[i%len(offsets)], buf)
				if err != nil {
					b.Fatal(err)
				}
				buf = rec.Payload[:0]
			}
		})
	}
}

// BenchmarkScrub measures Scrub unthrottled over cached sealed segments of
// 1 KiB and 64 KiB records: the CPU cost of verification per byte (the
// store's scrubber paces it to Options.ScrubRate):
//
//	go test -run x -bench Scrub -benchmem ./storage/commitlog/
func BenchmarkScrub(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			l, err := Open(Options{Dir: b.TempDir(), SegmentSize: 16 << 20, FlushMode: FlushAsync})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			p := bytesPayload(make([]byte, size))
			for l.Written() < 5*16<<20 {
				if _, err := l.Append(p); err != nil {
					b.Fatal(err)
				}
			}
			const budget = 1 << 20
			b.SetBytes(budget)
			b.ReportAllocs()
			b.ResetTimer()
			pos := int64(0)
			for range b.N {
				res, err := l.Scrub(pos, budget)
				if err != nil || len(res.Bad) > 0 {
					b.Fatal(err, res.Bad)
				}
				pos = res.Next
				if res.Done {
					pos = 0
				}
			}
		})
	}
}
