package consumequeue

import (
	"testing"
)

// BenchmarkSequentialRead reads 1M entries in batches of 32, as a consumer
// catching up does; one op is the whole queue.
func BenchmarkSequentialRead(b *testing.B) {
	const n = 1_000_000
	q, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	for i := int64(0); i < n; i++ {
		if err := q.Put(i, entryFor(i)); err != nil {
			b.Fatal(err)
		}
	}
	buf := make([]Entry, 32)
	b.SetBytes(n * EntrySize)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for off := int64(0); off < n; {
			got, err := q.Read(off, buf)
			if err != nil {
				b.Fatal(err)
			}
			off += int64(got)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*n), "ns/entry")
}

// BenchmarkPut appends entries with the default file size, file rolls
// included; one op is one entry.
func BenchmarkPut(b *testing.B) {
	q, err := Open(Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	b.SetBytes(EntrySize)
	b.ReportAllocs()
	var i int64
	for b.Loop() {
		if err := q.Put(i, entryFor(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
