package shard

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/raftlog"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// Put through a single-voter shard against Store.PutBatch on a plain
// store, same options (sync flush, 64 MiB segments), same load: `conc`
// writers each putting batches of 1 message of 1 KiB, b.N batches in
// all. Reported: msgs/s, p50 and p99 latency per Put.
//
//	go test -run '^$' -bench 'Put' -benchtime 3000x ./storage/shard/

func benchStoreOptions(dir string) raftlog.Options {
	o := testLogOptions(dir)
	o.Store.SegmentSize, o.Store.MaxMessageSize = 64<<20, 64<<10
	o.IndexFileEntries = raftlog.DefaultIndexFileEntries
	return o
}

func benchMsgs(w, k int) []*message.Message {
	return []*message.Message{storagetest.NewMessage("orders", int32(w%4), fmt.Sprintf("%d-%d-%01000d", w, k, k), "t")}
}

func runPutBench(b *testing.B, conc int, put func(ms []*message.Message, res []storage.PutResult) error) {
	var next atomic.Int64
	lat := make([][]time.Duration, conc)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := make([]storage.PutResult, 1)
			for {
				k := int(next.Add(1))
				if k > b.N {
					return
				}
				t0 := time.Now()
				if err := put(benchMsgs(w, k), res); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) == 0 {
		return
	}
	b.ReportMetric(float64(len(all))/took.Seconds(), "msgs/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkPut(b *testing.B) {
	for _, conc := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("direct/conc=%d", conc), func(b *testing.B) {
			so := benchStoreOptions(b.TempDir()).Store
			so.Clock = nil
			st, err := storage.Open(so)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			runPutBench(b, conc, st.PutBatch)
			b.ReportMetric(float64(st.Stats().Appends)/float64(max(st.Stats().Flushes, 1)), "records/flush")
		})
		b.Run(fmt.Sprintf("shard/conc=%d", conc), func(b *testing.B) {
			lo := benchStoreOptions(b.TempDir())
			lo.Store.Clock = nil
			s, err := Open(Options{ID: 1, Peers: []uint64{1}, Log: lo, Ticks: make(chan time.Time)})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			ctx := context.Background()
			runPutBench(b, conc, func(ms []*message.Message, res []storage.PutResult) error {
				return s.Put(ctx, storage.ClassSend, ms, res)
			})
			st := s.Status()
			b.ReportMetric(float64(st.Proposals)/float64(max(st.Readies, 1)), "proposals/ready")
			b.ReportMetric(float64(st.Overlapped)/float64(max(st.Readies, 1)), "overlapped/ready")
			ss := s.Store().Stats()
			b.ReportMetric(float64(ss.Appends)/float64(max(ss.Flushes, 1)), "records/flush")
		})
	}
}

// BenchmarkPutAB runs the same two paths as BenchmarkPut interleaved —
// chunks of 250 Puts on the direct store, then on the shard, over and
// over — so that both see the same noise of a shared machine, and
// reports each side's msgs/s and the ratio shard/direct.
//
//	go test -run '^$' -bench PutAB -benchtime 4000x ./storage/shard/
func BenchmarkPutAB(b *testing.B) {
	for _, conc := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			so := benchStoreOptions(b.TempDir()).Store
			so.Clock = nil
			st, err := storage.Open(so)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			lo := benchStoreOptions(b.TempDir())
			lo.Store.Clock = nil
			s, err := Open(Options{ID: 1, Peers: []uint64{1}, Log: lo, Ticks: make(chan time.Time)})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			ctx := context.Background()
			shardPut := func(ms []*message.Message, res []storage.PutResult) error {
				return s.Put(ctx, storage.ClassSend, ms, res)
			}
			rates := interleave(b, conc, st.PutBatch, shardPut)
			direct, shard := rates[0], rates[1]
			b.ReportMetric(direct, "direct-msgs/s")
			b.ReportMetric(shard, "shard-msgs/s")
			b.ReportMetric(shard/direct, "ratio")
		})
	}
}

// interleave runs b.N Puts on each side, in turns of chunks of 250 (conc
// writers, batches of one 1 KiB message), so that every side sees the
// same noise of a shared machine, and returns each side's msgs/s.
func interleave(b *testing.B, conc int, sides ...func([]*message.Message, []storage.PutResult) error) []float64 {
	const chunk = 250
	took := make([]time.Duration, len(sides))
	done := make([]int, len(sides))
	b.ResetTimer()
	for left := b.N; left > 0; {
		n := min(chunk, left)
		for side, put := range sides {
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for w := 0; w < conc; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res := make([]storage.PutResult, 1)
					for k := int(next.Add(1)); k <= n; k = int(next.Add(1)) {
						if err := put(benchMsgs(w, k), res); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			took[side] += time.Since(start)
			done[side] += n
		}
		left -= n
	}
	b.StopTimer()
	rates := make([]float64, len(sides))
	for k := range sides {
		rates[k] = float64(done[k]) / took[k].Seconds()
	}
	return rates
}

// BenchmarkPutThree: Puts through a single-voter shard against Puts
// through the leader of three replicas in this process (over an
// in-process transport: no network, no HTTP, no broker), interleaved as
// in BenchmarkPutAB. The ratio is what replication itself costs a send —
// the followers' appends, fsyncs and answers on the path, with every
// replica sharing this machine's CPUs and disk — apart from what the
// server around each replica adds.
//
//	go test -run '^$' -bench PutThree -benchtime 4000x ./storage/shard/
func BenchmarkPutThree(b *testing.B) {
	for _, conc := range []int{16, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			lo := benchStoreOptions(b.TempDir())
			lo.Store.Clock = nil
			one, err := Open(Options{ID: 1, Peers: []uint64{1}, Log: lo, Ticks: make(chan time.Time)})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = one.Close() }()
			net := &localNet{peers: map[uint64]*Shard{}, down: map[uint64]bool{}}
			for id := uint64(1); id <= 3; id++ {
				lo := benchStoreOptions(b.TempDir())
				lo.Store.Clock = nil
				s, err := Open(Options{ID: id, Peers: []uint64{1, 2, 3}, Log: lo,
					Transport: localTransport{net: net, from: id}, TickInterval: 20 * time.Millisecond})
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = s.Close() }()
				net.mu.Lock()
				net.peers[id] = s
				net.mu.Unlock()
			}
			var lead *Shard
			for deadline := time.Now().Add(10 * time.Second); lead == nil; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatal("no leader")
				}
				for _, s := range net.peers {
					if st := s.Status(); st.Role == "leader" && st.Serving {
						lead = s
					}
				}
			}
			ctx := context.Background()
			put := func(s *Shard) func([]*message.Message, []storage.PutResult) error {
				return func(ms []*message.Message, res []storage.PutResult) error {
					return s.Put(ctx, storage.ClassSend, ms, res)
				}
			}
			rates := interleave(b, conc, put(one), put(lead))
			b.ReportMetric(rates[0], "single-msgs/s")
			b.ReportMetric(rates[1], "three-msgs/s")
			b.ReportMetric(rates[1]/rates[0], "ratio")
			if st := lead.Status(); st.Proposals > 0 {
				b.ReportMetric(float64(b.N)/float64(st.Proposals), "msgs/entry")
			}
		})
	}
}

// BenchmarkCopy: a copy of a replica's data (WriteCopy into ReceiveCopy
// through a pipe, as over the peer port) of a 256 MiB CommitLog in 64 MiB
// segments; reported in MB/s of CommitLog (the catch-up speed of a
// replica that starts from a copy; the network aside).
//
//	go test -run '^$' -bench 'Copy' -benchtime 3x ./storage/shard/
func BenchmarkCopy(b *testing.B) {
	o := benchStoreOptions(b.TempDir())
	src, err := Open(Options{ID: 1, Peers: []uint64{1}, Log: o, Ticks: make(chan time.Time)})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	body := fmt.Sprintf("%065536d", 0)
	for src.Store().WriteOffset() < 256<<20 {
		ms := make([]*message.Message, 64)
		for i := range ms {
			ms[i] = storagetest.NewMessage("orders", int32(i%4), body[:60<<10], "t")
		}
		if err := src.Put(context.Background(), storage.ClassSend, ms, make([]storage.PutResult, len(ms))); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(src.Store().WriteOffset())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		pr, pw := io.Pipe()
		go func() {
			_, err := src.WriteCopy(context.Background(), pw)
			pw.CloseWithError(err)
		}()
		if _, err := ReceiveCopy(context.Background(), pr, benchStoreOptions(dir), 2); err != nil {
			b.Fatal(err)
		}
		_ = pr.Close()
	}
}
