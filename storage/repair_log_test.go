package storage_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// salvageFixture stores n messages round robin over queues 0..2 of topic
// "sv" in segments of 64 KiB, closes the store and returns the body each
// (queue, offset) holds and where each message's record is.
func salvageFixture(t *testing.T, n int) (storage.Options, map[[2]int64]string, map[[2]int64][2]int64) {
	t.Helper()
	opts := storagetest.SmallOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	bodies := map[[2]int64]string{}
	phys := map[[2]int64][2]int64{}
	for i := 0; i < n; i++ {
		q := int32(i % 3)
		body := fmt.Sprintf("m%05d-%s", i, strings.Repeat("x", 200))
		r := storagetest.MustPut(t, s, storagetest.NewMessage("sv", q, body, ""))
		bodies[[2]int64{int64(q), r.QueueOffset}] = body
		phys[[2]int64{int64(q), r.QueueOffset}] = [2]int64{r.PhysicalOffset, r.PhysicalOffset + int64(r.Size)}
	}
	require.NoError(t, s.Close())
	return opts, bodies, phys
}

func segBase(t *testing.T, path string) int64 {
	var b int64
	_, err := fmt.Sscanf(filepath.Base(path), "%d", &b)
	require.NoError(t, err)
	return b
}

// A deleted middle segment, a truncated old one, a zeroed tail: Open
// refuses, Repair's dry run changes nothing and names the loss exactly,
// the applied repair keeps every intact message at its queue offset, the
// lost offsets are passed over, and new messages get offsets above every
// one given out before.
func TestRepairCommitLogDamage(t *testing.T) {
	t.Parallel()
	damages := map[string]func(t *testing.T, segs []string) (from, to int64){
		"MiddleSegmentDeleted": func(t *testing.T, segs []string) (int64, int64) {
			require.NoError(t, os.Remove(segs[2]))
			return segBase(t, segs[2]), segBase(t, segs[3])
		},
		"OldSegmentTruncated": func(t *testing.T, segs []string) (int64, int64) {
			require.NoError(t, os.Truncate(segs[1], 30_000))
			return segBase(t, segs[1]) + 30_000, segBase(t, segs[2])
		},
		"TailZeroed": func(t *testing.T, segs []string) (int64, int64) {
			last := segs[len(segs)-1]
			storagetest.ZeroFrom(t, last, 10_000)
			return segBase(t, last) + 10_000, 1 << 62
		},
		// One flipped bit in a record the recovery after a crash verifies:
		// only that record is given up; the frames after it in its segment
		// stay, and later recoveries pass over it.
		"BitFlipAfterCrash": func(t *testing.T, segs []string) (int64, int64) {
			last := segs[len(segs)-1]
			b, err := os.ReadFile(last)
			require.NoError(t, err)
			var starts []int
			for pos := 0; pos+commitlog.HeaderSize <= len(b); {
				size := int(binary.BigEndian.Uint32(b[pos:]))
				if size == 0 {
					break
				}
				starts = append(starts, pos)
				pos += size
			}
			require.Greater(t, len(starts), 4)
			at := starts[len(starts)/2]
			b[at+commitlog.HeaderSize+60] ^= 0x10
			require.NoError(t, os.WriteFile(last, b, 0o644))
			storagetest.SimulateCrash(t, filepath.Dir(filepath.Dir(last)))
			return segBase(t, last) + int64(at), segBase(t, last) + int64(at) + 1
		},
		// Nothing of the log is left: it restarts above the mark, and
		// the queues' offsets continue above every one given out.
		"AllSegmentsDeleted": func(t *testing.T, segs []string) (int64, int64) {
			for _, s := range segs {
				require.NoError(t, os.Remove(s))
			}
			return 0, 1 << 62
		},
		// The ConsumeQueues are rebuilt from the CommitLog after the
		// repair: the hole is closed with placeholders, and the queue
		// table's maxima keep the lost offsets taken.
		"MiddleSegmentAndQueuesDeleted": func(t *testing.T, segs []string) (int64, int64) {
			require.NoError(t, os.Remove(segs[2]))
			require.NoError(t, os.RemoveAll(filepath.Join(filepath.Dir(filepath.Dir(segs[2])), "consumequeue")))
			return segBase(t, segs[2]), segBase(t, segs[3])
		},
		// Without the queue table either, every record is re-dispatched;
		// the dispatcher closes the hole once a rebuild has shown that
		// the missing offsets are not in the log.
		"MiddleSegmentQueuesAndTableDeleted": func(t *testing.T, segs []string) (int64, int64) {
			require.NoError(t, os.Remove(segs[2]))
			dir := filepath.Dir(filepath.Dir(segs[2]))
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue")))
			require.NoError(t, os.Remove(filepath.Join(dir, "queues")))
			return segBase(t, segs[2]), segBase(t, segs[3])
		},
		"TailZeroedAndQueuesDeleted": func(t *testing.T, segs []string) (int64, int64) {
			last := segs[len(segs)-1]
			storagetest.ZeroFrom(t, last, 10_000)
			require.NoError(t, os.RemoveAll(filepath.Join(filepath.Dir(filepath.Dir(last)), "consumequeue")))
			return segBase(t, last) + 10_000, 1 << 62
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts, bodies, phys := salvageFixture(t, 1200)
			segs := storagetest.Segments(t, opts.Dir)
			require.GreaterOrEqual(t, len(segs), 4)
			from, to := damage(t, segs)
			want := map[[2]int64]bool{} // truly lost
			for k, p := range phys {
				if p[1] > from && p[0] < to { // any byte of the record damaged
					want[k] = true
				}
			}

			_, err := storage.Open(opts)
			require.ErrorIs(t, err, storage.ErrCorrupt)

			before := storagetest.DirDigest(t, opts.Dir)
			rep, err := storage.Repair(storage.RepairOptions{Store: opts})
			require.NoError(t, err)
			require.Equal(t, before, storagetest.DirDigest(t, opts.Dir), "the dry run changed files")
			require.Len(t, rep.Damaged, 1, "%+v", rep)
			var out strings.Builder
			rep.WriteText(&out, false)
			t.Log(out.String())

			lost := map[[2]int64]bool{}
			for _, l := range rep.Lost {
				require.Equal(t, "sv", l.Topic)
				for o := l.From; o < l.To; o++ {
					lost[[2]int64{int64(l.QueueID), o}] = true
				}
			}
			for k := range lost {
				if !want[k] {
					// Reported lost although intact: only allowed for
					// records in the rest of a damaged segment.
					require.GreaterOrEqual(t, phys[k][0], rep.Damaged[0].From, "%v reported lost", k)
					require.Less(t, phys[k][0], rep.Damaged[0].To, "%v reported lost", k)
				}
			}
			for k := range want {
				require.True(t, lost[k], "%v lost but not reported", k)
			}
			require.EqualValues(t, len(lost), rep.LostMessages)

			rep, err = storage.Repair(storage.RepairOptions{Store: opts, Apply: true})
			require.NoError(t, err)
			require.True(t, rep.Applied)

			s := storagetest.MustOpen(t, opts)
			for q := int32(0); q < 3; q++ {
				max := s.MaxOffset("sv", q)
				got := int64(0)
				for next := int64(0); next < max; {
					res, err := s.ReadQueue("sv", q, next, 32, nil)
					require.NoError(t, err)
					require.Greater(t, res.Next, next)
					for _, m := range res.Messages {
						k := [2]int64{int64(q), m.QueueOffset}
						require.False(t, lost[k], "lost %v served", k)
						require.Equal(t, bodies[k], string(m.Body))
						got++
					}
					next = res.Next
				}
				intact := int64(0)
				for k := range bodies {
					if k[0] == int64(q) && !lost[k] {
						intact++
					}
				}
				require.Equal(t, intact, got, "queue %d", q)
				r := storagetest.MustPut(t, s, storagetest.NewMessage("sv", q, "after", ""))
				_, used := bodies[[2]int64{int64(q), r.QueueOffset}]
				require.False(t, used, "queue %d offset %d given out twice", q, r.QueueOffset)
			}
			require.Zero(t, s.Quarantined().Count)
			require.NoError(t, s.Close())

			// Again: nothing left to repair (a damaged record left in place
			// is listed again, and nothing else); a crash and a lost
			// checkpoint are recovered without giving anything up.
			rep, err = storage.Repair(storage.RepairOptions{Store: opts})
			require.NoError(t, err)
			for _, d := range rep.Damaged {
				require.True(t, d.InPlace, "%+v", d)
			}
			storagetest.SimulateCrash(t, opts.Dir)
			s = storagetest.MustOpen(t, opts)
			require.False(t, s.Recovery().CommitLog.Corrupt)
			require.Zero(t, s.Recovery().CommitLog.TruncatedBytes)
			require.NoError(t, s.Close())
			storagetest.RemoveCheckpoint(t, opts.Dir)
			storagetest.SimulateCrash(t, opts.Dir)
			s = storagetest.MustOpen(t, opts)
			require.Zero(t, s.Recovery().CommitLog.TruncatedBytes, "no cut after a repair")
			for q := int32(0); q < 3; q++ {
				res, err := s.ReadQueue("sv", q, s.MaxOffset("sv", q)-1, 1, nil)
				require.NoError(t, err)
				require.Len(t, res.Messages, 1)
				require.Equal(t, "after", string(res.Messages[0].Body))
			}
		})
	}
}
