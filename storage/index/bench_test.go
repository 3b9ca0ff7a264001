package index

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchKeys returns n keys shaped like the store's ("topic\x00\x00order-N").
func benchKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = strconv.AppendInt([]byte("TopicTest\x00\x00order-"), int64(i), 10)
	}
	return keys
}

// BenchmarkAdd measures Add with the default geometry (5M slots, 20M
// entries per 420 MB file), three keys per message, including the page
// faults of a fresh file and any roll.
func BenchmarkAdd(b *testing.B) {
	x, err := Open(Options{Dir: b.TempDir()})
	require.NoError(b, err)
	defer func() { require.NoError(b, x.Close()) }()
	keys := benchKeys(1 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := x.Add(keys[i&(len(keys)-1)], int64(i/3)*512, baseTS+int64(i/1000)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup measures Lookup(max 32) over one million entries: 100 000
// keys with ten messages each, in 250 000 slots (average chain length 4).
func BenchmarkLookup(b *testing.B) {
	for _, window := range []struct {
		name       string
		begin, end int64
	}{{"AllTime", 0, 0}, {"Range", baseTS + 200, baseTS + 800}} {
		b.Run(window.name, func(b *testing.B) {
			x, err := Open(Options{Dir: b.TempDir(), SlotCount: 250_000, EntryCount: 2_000_000})
			require.NoError(b, err)
			defer func() { require.NoError(b, x.Close()) }()
			keys := benchKeys(100_000)
			for i := 0; i < 1_000_000; i++ {
				require.NoError(b, x.Add(keys[i%len(keys)], int64(i)*512, baseTS+int64(i/1000)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			found := 0
			for i := 0; i < b.N; i++ {
				got, err := x.Lookup(keys[(i*7919)%len(keys)], window.begin, window.end, 32)
				if err != nil {
					b.Fatal(err)
				}
				found += len(got)
			}
			b.ReportMetric(float64(found)/float64(b.N), "results/op")
		})
	}
}

func ExampleIndex() {
	dir, cleanup := exampleDir()
	defer cleanup()
	x, err := Open(Options{Dir: dir, SlotCount: 1024, EntryCount: 4096})
	if err != nil {
		panic(err)
	}
	// The dispatcher adds every key of every message...
	_ = x.Add([]byte("orders\x00\x00order-42"), 1000, 1_718_000_000_000)
	_ = x.Add([]byte("orders\x00\x01uniq-7"), 1000, 1_718_000_000_000)
	_ = x.Add([]byte("orders\x00\x00order-42"), 2048, 1_718_000_000_500)
	// ...and an admin query asks for candidates, newest first.
	offsets, _ := x.Lookup([]byte("orders\x00\x00order-42"), 0, 0, 10)
	fmt.Println(offsets, x.MaxPhysicalOffset())
	_ = x.Close()
	// Output: [2048 1000] 2048
}

func exampleDir() (string, func()) {
	dir, err := os.MkdirTemp("", "index-example")
	if err != nil {
		panic(err)
	}
	return dir, func() { _ = os.RemoveAll(dir) }
}
