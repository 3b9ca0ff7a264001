// fsyncprobe: the disk's own durable-write latency, the floor under a
// sync send's tail. It writes -size bytes at a time at the end of a file
// already written with zeros (as mqgate's CommitLog keeps ahead of its
// frames) and fdatasyncs after each write, every -interval, for -duration,
// with nothing else running in the process, then prints the distribution.
// With -unwritten the file is fallocate'd instead, as a fresh CommitLog
// segment is, so each fdatasync also commits the conversion of the blocks
// it wrote from unwritten to written. With -chunk each write is split into
// page-aligned pwrites of at most that many bytes (as a writer of many
// small records would write them); the summary gives the time spent
// writing, apart from the flushes.
//
//	go run ./cmd/fsyncprobe -dir /var/lib/mqgate -duration 8s
//	go run ./cmd/fsyncprobe -size 757760 -interval 0 -ahead 1073741824 -duration 3s -unwritten
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to probe")
	size := flag.Int("size", 2048, "bytes written before each fdatasync")
	dur := flag.Duration("duration", 8*time.Second, "how long to probe")
	interval := flag.Duration("interval", 200*time.Microsecond, "pause between flushes")
	unwritten := flag.Bool("unwritten", false, "fallocate the file (unwritten blocks, as a new segment) instead of writing zeros ahead")
	ahead := flag.Int64("ahead", 256<<20, "bytes prepared ahead of the writes (the probe stops at their end)")
	chunk := flag.Int("chunk", 0, "split each write into page-aligned pwrites of at most this many bytes (0: one pwrite)")
	flag.Parse()
	if *chunk < 0 {
		log.Fatal("-chunk must be 0 (one pwrite) or a positive number of bytes")
	}
	name := filepath.Join(*dir, fmt.Sprintf(".fsyncprobe-%d", os.Getpid()))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	defer os.Remove(name)
	defer f.Close()
	// Zeros ahead (or fallocate'd blocks), flushed before the clock starts.
	if *unwritten {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, *ahead); err != nil {
			log.Fatal(err)
		}
	} else {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < *ahead; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), *ahead-off)], off); err != nil {
				log.Fatal(err)
			}
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, *size)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	var took []time.Duration
	var writing time.Duration
	off := int64(0)
	for end := time.Now().Add(*dur); time.Now().Before(end) && off+int64(*size) <= *ahead; off += int64(*size) {
		w := time.Now()
		writeAt(f, buf, off, *chunk)
		t := time.Now()
		writing += t.Sub(w)
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			log.Fatal(err)
		}
		took = append(took, time.Since(t))
		time.Sleep(*interval)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	n := len(took)
	if n == 0 {
		log.Fatal("no flush measured")
	}
	q := func(p float64) time.Duration { return took[min(n-1, int(p*float64(n)))] }
	over := func(d time.Duration) int { return n - sort.Search(n, func(i int) bool { return took[i] > d }) }
	blocks := "zeros written ahead"
	if *unwritten {
		blocks = "fallocate'd (unwritten) blocks"
	}
	fmt.Printf("fsyncprobe %s, %s: %d flushes of %d B: p50 %v p90 %v p99 %v p99.9 %v max %v; over 2 ms %d (%.2f%%), over 10 ms %d; writing %v a flush (%.2f GB/s, chunk %d)\n",
		*dir, blocks, n, *size, q(0.5).Round(time.Microsecond), q(0.9).Round(time.Microsecond), q(0.99).Round(time.Microsecond),
		q(0.999).Round(time.Microsecond), took[n-1].Round(time.Microsecond), over(2*time.Millisecond),
		100*float64(over(2*time.Millisecond))/float64(n), over(10*time.Millisecond),
		(writing / time.Duration(n)).Round(100*time.Nanosecond), float64(n)*float64(*size)/writing.Seconds()/1e9, *chunk)
}

// writeAt writes buf at off with one pwrite, or with chunk > 0 as
// pwrites that each end at or before the next multiple of chunk.
func writeAt(f *os.File, buf []byte, off int64, chunk int) {
	for len(buf) > 0 {
		k := len(buf)
		if chunk > 0 {
			k = min(k, chunk-int(off%int64(chunk)))
		}
		if _, err := f.WriteAt(buf[:k], off); err != nil {
			log.Fatal(err)
		}
		buf, off = buf[k:], off+int64(k)
	}
}
