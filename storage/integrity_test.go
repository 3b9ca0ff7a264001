package storage_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/storagetest"
)

// Tests of "Damaged records" (doc.go): bytes flipped in a stored message
// body, on real files, with the store open or stopped.

// integrityOptions are SmallOptions without the background scrubber, so a
// test decides who finds the damage first.
func integrityOptions(dir string) storage.Options {
	o := storagetest.SmallOptions(dir)
	o.ScrubRate = -1
	return o
}

// stored is a message a test put, with what identifies it.
type stored struct {
	storage.PutResult
	body, key, uniq string
}

// putNumbered stores n messages of about size bytes on topic/queue; each
// body, key and UNIQ_KEY carries the message's number.
func putNumbered(t *testing.T, s *storage.Store, topic string, queueID int32, n, size int) []stored {
	t.Helper()
	out := make([]stored, 0, n)
	for i := range n {
		st := stored{
			body: fmt.Sprintf("body-%s-%d-%03d-%s", topic, queueID, i, strings.Repeat("x", size)),
			key:  fmt.Sprintf("key-%d-%d", queueID, i),
			uniq: fmt.Sprintf("uniq-%d-%d", queueID, i),
		}
		m := storagetest.NewMessage(topic, queueID, st.body, "tag", st.key)
		m.SetProperty(message.PropertyUniqKey, st.uniq)
		if topic == message.ScheduleTopic {
			m.SetProperty(message.PropertyDeliverTimeMs, "1")
		}
		st.PutResult = storagetest.MustPut(t, s, m)
		out = append(out, st)
	}
	return out
}

// damageBody flips a bit in the middle of m's body in its segment file.
func damageBody(t *testing.T, dir string, m stored) {
	t.Helper()
	path, off := storagetest.BodyOffset(t, dir, m.PhysicalOffset, []byte(m.body))
	storagetest.FlipBit(t, path, off, 3)
}

// activeBase is the base offset of the store's active CommitLog segment
// (the one being written; its file is not the last when the next one is
// preallocated).
func activeBase(s *storage.Store, opts storage.Options) int64 {
	end := s.Stats().CommitLogMax
	return end - end%opts.SegmentSize
}

// readAll reads topic/queue from its minimum to its end.
func readAll(t *testing.T, s *storage.Store, topic string, queueID int32) (bodies []string, quarantined int) {
	t.Helper()
	next := s.MinOffset(topic, queueID)
	for next < s.MaxOffset(topic, queueID) {
		res, err := s.ReadQueue(topic, queueID, next, 7, nil)
		require.NoError(t, err)
		require.Greater(t, res.Next, next)
		for _, m := range res.Messages {
			bodies = append(bodies, string(m.Body))
		}
		quarantined += res.Quarantined
		next = res.Next
	}
	return bodies, quarantined
}

// bodiesExcept lists the bodies of ms, leaving out the ones at skip.
func bodiesExcept(ms []stored, skip ...int) []string {
	var out []string
	for i, m := range ms {
		if !containsInt(skip, i) {
			out = append(out, m.body)
		}
	}
	return out
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestDamagedRecordIsNeverServed flips a bit in one message body, in a
// sealed segment or in the active one, while the store is open or while
// it is stopped: no read path serves it, the queue readers and the
// key/uniq lookups quarantine it once, and every other message is still
// delivered in order.
func TestDamagedRecordIsNeverServed(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"SealedSegment", "ActiveSegment"} {
		for _, when := range []string{"WhileOpen", "WhileStopped"} {
			t.Run(where+"/"+when, func(t *testing.T) {
				t.Parallel()
				opts := integrityOptions(t.TempDir())
				s, err := storage.Open(opts)
				require.NoError(t, err)
				defer func() { _ = s.Close() }()
				ms := putNumbered(t, s, "t", 0, 45, 3000)
				waitDispatched(t, s, "t", 0, 45)
				active := activeBase(s, opts)
				victim := 3
				if where == "ActiveSegment" {
					for victim = 0; ms[victim].PhysicalOffset < active; victim++ {
					}
					require.Less(t, victim, len(ms)-1, "a message follows the victim")
				} else {
					require.Less(t, ms[victim].PhysicalOffset+int64(ms[victim].Size), active)
				}
				v := ms[victim]
				if when == "WhileOpen" {
					damageBody(t, opts.Dir, v)
				} else {
					require.NoError(t, s.Close())
					damageBody(t, opts.Dir, v)
					s = storagetest.MustOpen(t, opts)
				}

				// A message id is client input: refused, not quarantined.
				_, err = s.LookupID(v.ID)
				require.ErrorIs(t, err, storage.ErrNotFound)
				require.Zero(t, s.Quarantined().Count)

				_, err = s.Lookup(v.PhysicalOffset)
				require.ErrorIs(t, err, storage.ErrNotFound)
				require.ErrorIs(t, err, storage.ErrCorrupt)
				q := s.Quarantined()
				require.Equal(t, int64(1), q.Count)
				require.Equal(t, v.PhysicalOffset, q.Recent[0].Offset)
				require.Equal(t, v.Size, q.Recent[0].Size)
				require.Equal(t, "read", q.Recent[0].Stage)
				require.Contains(t, q.Recent[0].Reason, "CRC-32C mismatch")
				require.Contains(t, q.Recent[0].Reason, strconv.FormatInt(v.PhysicalOffset, 10))

				bodies, quarantined := readAll(t, s, "t", 0)
				require.Equal(t, bodiesExcept(ms, victim), bodies)
				require.Equal(t, 1, quarantined)

				got, err := s.QueryByKey("t", v.key, 0, 0, 10)
				require.NoError(t, err)
				require.Empty(t, got)
				got, err = s.QueryByKey("t", ms[victim+1].key, 0, 0, 10)
				require.NoError(t, err)
				require.Len(t, got, 1)
				_, err = s.FindByUniqKey("t", v.uniq)
				require.ErrorIs(t, err, storage.ErrNotFound)
				m, err := s.FindByUniqKey("t", ms[victim+1].uniq)
				require.NoError(t, err)
				require.Equal(t, ms[victim+1].body, string(m.Body))

				require.Equal(t, int64(1), s.Quarantined().Count, "found by several readers, counted once")
				// The queue goes on after it.
				r := storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, "after", ""))
				require.Equal(t, int64(45), r.QueueOffset)
				waitDispatched(t, s, "t", 0, 46)
				res, err := s.ReadQueue("t", 0, 45, 1, nil)
				require.NoError(t, err)
				require.Equal(t, "after", string(res.Messages[0].Body))
			})
		}
	}
}

// TestScheduleSourcePassesOverDamagedRecord: the delay scheduler's reads
// (a level is a queue of the schedule topic) skip a damaged message and
// deliver the others.
func TestScheduleSourcePassesOverDamagedRecord(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	ms := putNumbered(t, s, message.ScheduleTopic, 0, 3, 100)
	waitDispatched(t, s, message.ScheduleTopic, 0, 3)
	damageBody(t, opts.Dir, ms[1])
	got, next, err := s.ScheduleSource().ReadLevel(1, 0, 10)
	require.NoError(t, err)
	require.Equal(t, int64(3), next)
	require.Len(t, got, 2)
	require.Equal(t, ms[0].body, string(got[0].Body))
	require.Equal(t, ms[2].body, string(got[1].Body))
	require.Equal(t, int64(1), s.Quarantined().Count)
}

// TestSearchOffsetByTimePassesOverDamagedRecord: the binary search that
// resets offsets by time quarantines a damaged record it probes and
// answers from its neighbours instead of failing.
func TestSearchOffsetByTimePassesOverDamagedRecord(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	ms := putNumbered(t, s, "t", 0, 3, 100)
	waitDispatched(t, s, "t", 0, 3)
	damageBody(t, opts.Dir, ms[1]) // the first entry the search probes
	off, err := s.SearchOffsetByTime("t", 0, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, int64(3), off)
	off, err = s.SearchOffsetByTime("t", 0, 0)
	require.NoError(t, err)
	require.Equal(t, int64(0), off)
	q := s.Quarantined()
	require.Equal(t, int64(1), q.Count)
	require.Equal(t, ms[1].PhysicalOffset, q.Recent[0].Offset)
	require.Contains(t, q.Recent[0].Reason, "t/0 offset 1")
}

// TestRedispatchPassesOverDamagedRecord: the dispatcher meets records
// whose CRC fails (here: re-dispatching a log whose ConsumeQueues were
// lost). Each is quarantined at stage "dispatch" and passed over; its
// queue offset becomes a placeholder, so the queue stays dense and every
// other message is delivered — also when the damaged record was the
// first of its queue.
func TestRedispatchPassesOverDamagedRecord(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	var q0, q1 []stored
	for i := range 12 {
		q0 = append(q0, putNumbered(t, s, "t", 0, 1, 200+i)...)
		q1 = append(q1, putNumbered(t, s, "t", 1, 1, 300+i)...)
	}
	waitDispatched(t, s, "t", 1, 12)
	require.NoError(t, s.Close())
	clean, flushed, _, err := storage.CheckpointForTest(opts.Dir)
	require.NoError(t, err)
	require.True(t, clean)
	require.NoError(t, os.RemoveAll(filepath.Join(opts.Dir, "consumequeue")))
	require.NoError(t, storage.WriteCheckpointForTest(opts.Dir, true, flushed, 0))
	for _, m := range []stored{q0[0], q0[5], q1[11]} {
		damageBody(t, opts.Dir, m)
	}

	s = storagetest.MustOpen(t, opts)
	q := s.Quarantined()
	require.Equal(t, int64(3), q.Count)
	for i, want := range []stored{q0[0], q0[5], q1[11]} {
		require.Equal(t, want.PhysicalOffset, q.Recent[i].Offset)
		require.Equal(t, "dispatch", q.Recent[i].Stage)
		require.Contains(t, q.Recent[i].Reason, "CRC-32C mismatch")
	}
	require.NoError(t, s.DispatchStatus().Err)
	require.Equal(t, int64(0), s.MinOffset("t", 0))
	require.Equal(t, int64(12), s.MaxOffset("t", 0), "placeholders keep the queue dense")
	bodies, quarantined := readAll(t, s, "t", 0)
	require.Equal(t, bodiesExcept(q0, 0, 5), bodies)
	require.Equal(t, 2, quarantined, "the placeholders")
	bodies, _ = readAll(t, s, "t", 1)
	require.Equal(t, bodiesExcept(q1, 11), bodies)
	require.Equal(t, int64(3), s.Quarantined().Count)

	r := storagetest.MustPut(t, s, storagetest.NewMessage("t", 0, "after", ""))
	require.Equal(t, int64(12), r.QueueOffset)
	waitDispatched(t, s, "t", 0, 13)
}

// TestRedispatchStopsAtDamagedHeader: past a frame whose header is
// garbage nothing can be located, so re-dispatch does not guess: Open
// fails with ErrCorrupt and names the offset.
func TestRedispatchStopsAtDamagedHeader(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	ms := putNumbered(t, s, "t", 0, 10, 500)
	waitDispatched(t, s, "t", 0, 10)
	require.NoError(t, s.Close())
	_, flushed, _, err := storage.CheckpointForTest(opts.Dir)
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(opts.Dir, "consumequeue")))
	require.NoError(t, storage.WriteCheckpointForTest(opts.Dir, true, flushed, 0))
	path, _ := storagetest.BodyOffset(t, opts.Dir, ms[4].PhysicalOffset, []byte(ms[4].body))
	storagetest.FlipBit(t, path, ms[4].PhysicalOffset+5, 0) // the magic (one segment: file offset = log offset)
	_, err = storage.Open(opts)
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.Contains(t, err.Error(), strconv.FormatInt(ms[4].PhysicalOffset, 10))
}

// TestUncleanRecoveryVerifiesFromDispatched: after a crash every frame
// from the checkpoint's dispatched offset on is verified, even in an
// older segment than the flushed offset's: a damaged record there is
// corruption below the high-water mark (Open fails unless AllowCorrupt,
// which cuts the log at it). A clean start verifies nothing (the readers
// catch the damage), and without a checkpoint the first bad frame ends the
// log as a torn tail.
func TestUncleanRecoveryVerifiesFromDispatched(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (storage.Options, []stored, int64) {
		opts := integrityOptions(t.TempDir())
		s := storagetest.MustOpen(t, opts)
		ms := putNumbered(t, s, "t", 0, 60, 3000)
		waitDispatched(t, s, "t", 0, 60)
		require.NoError(t, s.Close())
		require.Greater(t, len(storagetest.Segments(t, opts.Dir)), 2)
		_, flushed, _, err := storage.CheckpointForTest(opts.Dir)
		require.NoError(t, err)
		require.Greater(t, flushed, opts.SegmentSize, "the flushed offset is past the first segment")
		damageBody(t, opts.Dir, ms[6]) // in the first segment
		return opts, ms, flushed
	}
	t.Run("ErrCorrupt", func(t *testing.T) {
		t.Parallel()
		opts, ms, flushed := setup(t)
		// The checkpointer last ran when message 5 was dispatched.
		require.NoError(t, storage.WriteCheckpointForTest(opts.Dir, false, flushed, ms[5].PhysicalOffset+int64(ms[5].Size)))
		storagetest.SimulateCrash(t, opts.Dir)
		_, err := storage.Open(opts)
		require.ErrorIs(t, err, storage.ErrCorrupt)
	})
	t.Run("AllowCorruptCutsThere", func(t *testing.T) {
		t.Parallel()
		opts, ms, flushed := setup(t)
		require.NoError(t, storage.WriteCheckpointForTest(opts.Dir, false, flushed, ms[5].PhysicalOffset+int64(ms[5].Size)))
		storagetest.SimulateCrash(t, opts.Dir)
		opts.AllowCorrupt = true
		s := storagetest.MustOpen(t, opts)
		rec := s.Recovery()
		require.True(t, rec.Abnormal)
		require.True(t, rec.CommitLog.Corrupt)
		require.Equal(t, ms[6].PhysicalOffset, rec.CommitLog.End)
		bodies, _ := readAll(t, s, "t", 0)
		require.Equal(t, bodiesExcept(ms[:6]), bodies)
	})
	t.Run("CleanStartLeavesItToReaders", func(t *testing.T) {
		t.Parallel()
		opts, ms, _ := setup(t)
		s := storagetest.MustOpen(t, opts)
		require.False(t, s.Recovery().Abnormal)
		bodies, quarantined := readAll(t, s, "t", 0)
		require.Equal(t, bodiesExcept(ms, 6), bodies)
		require.Equal(t, 1, quarantined)
	})
	t.Run("NoCheckpointIsTornTail", func(t *testing.T) {
		t.Parallel()
		opts, ms, _ := setup(t)
		storagetest.RemoveCheckpoint(t, opts.Dir)
		storagetest.SimulateCrash(t, opts.Dir)
		s := storagetest.MustOpen(t, opts)
		rec := s.Recovery()
		require.False(t, rec.CommitLog.Corrupt)
		require.True(t, rec.CommitLog.Torn)
		require.Equal(t, ms[6].PhysicalOffset, rec.CommitLog.End)
		require.NotEmpty(t, rec.CommitLog.Quarantined, ".broken copies are kept")
	})
}

// TestScrubberFindsDamageNobodyReads: a flipped bit in an old message no
// consumer reads is found by the scrubber's pass over the log (every
// sealed segment and the durable part of the active one), quarantined at
// stage "scrub", and the progress survives a restart.
func TestScrubberFindsDamageNobodyReads(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	s, err := storage.Open(opts)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	ms := putNumbered(t, s, "t", 0, 60, 3000)
	waitDispatched(t, s, "t", 0, 60)
	durable := s.Stats().CommitLogMax // sync mode: written is flushed
	require.Greater(t, durable, activeBase(s, opts), "the active segment holds records")
	damageBody(t, opts.Dir, ms[2])

	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := 0
	for ; s.ScrubStatus().Passes == 0; steps++ {
		require.Less(t, steps, 1000)
		res, err := storage.RunScrubForTest(s, t0.Add(time.Duration(steps)*time.Second), 16<<10)
		require.NoError(t, err)
		require.LessOrEqual(t, res.Bytes, int64(16<<10+opts.MaxMessageSize+64))
	}
	require.Greater(t, steps, 5, "the budget paces the pass")
	st := s.ScrubStatus()
	require.Equal(t, durable, st.BytesVerified, "every durable byte")
	require.Equal(t, int64(1), st.BadFrames)
	require.Equal(t, t0.Add(time.Duration(steps-1)*time.Second), st.LastPassAt)
	require.Equal(t, t0.Add(storage.DefaultScrubInterval), st.NextPassAt)
	require.True(t, st.PassStartedAt.IsZero())
	q := s.Quarantined()
	require.Equal(t, int64(1), q.Count)
	require.Equal(t, ms[2].PhysicalOffset, q.Recent[0].Offset)
	require.Equal(t, "scrub", q.Recent[0].Stage)
	require.Contains(t, q.Recent[0].Reason, "CRC-32C mismatch")

	// Not due again until the interval has passed.
	res, err := storage.RunScrubForTest(s, t0.Add(time.Hour), 0)
	require.NoError(t, err)
	require.Zero(t, res.Bytes)
	res, err = storage.RunScrubForTest(s, t0.Add(storage.DefaultScrubInterval), 1<<30)
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Equal(t, int64(2), s.ScrubStatus().Passes)
	require.Equal(t, int64(1), s.Quarantined().Count, "found again, counted once")

	// The readers agree, and the progress outlives a restart.
	bodies, _ := readAll(t, s, "t", 0)
	require.Equal(t, bodiesExcept(ms, 2), bodies)
	require.NoError(t, s.Close())
	s = storagetest.MustOpen(t, opts)
	st = s.ScrubStatus()
	require.Equal(t, int64(2), st.Passes)
	require.Equal(t, t0.Add(storage.DefaultScrubInterval), st.LastPassAt)
	require.Equal(t, int64(1), s.Quarantined().Count)
}

// TestScrubberCoversTheActiveSegment: damage in the newest segment's
// durable part is found by the scrubber too, not only when a reader or
// the next recovery gets there.
func TestScrubberCoversTheActiveSegment(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	ms := putNumbered(t, s, "t", 0, 10, 300)
	waitDispatched(t, s, "t", 0, 10)
	require.Zero(t, activeBase(s, opts), "every record is in the first, active segment")
	damageBody(t, opts.Dir, ms[7])
	res, err := storage.RunScrubForTest(s, time.Now(), 1<<30)
	require.NoError(t, err)
	require.True(t, res.Done)
	require.Equal(t, s.Stats().CommitLogMax, res.Next, "up to the durable end")
	require.Len(t, res.Bad, 1)
	require.Equal(t, ms[7].PhysicalOffset, res.Bad[0].Offset)
	q := s.Quarantined()
	require.Equal(t, int64(1), q.Count)
	require.Equal(t, "scrub", q.Recent[0].Stage)
}

// TestScrubberResumesMidPass: a restart during a pass resumes it at the
// start of the segment it was in.
func TestScrubberResumesMidPass(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	putNumbered(t, s, "t", 0, 60, 3000)
	now := time.Now()
	res, err := storage.RunScrubForTest(s, now, opts.SegmentSize+opts.SegmentSize/2)
	require.NoError(t, err)
	require.False(t, res.Done)
	require.Greater(t, res.Next, opts.SegmentSize)
	require.NoError(t, s.Close())

	s = storagetest.MustOpen(t, opts)
	st := s.ScrubStatus()
	require.Equal(t, opts.SegmentSize, st.Position, "the base of the segment it was in")
	require.WithinDuration(t, now, st.PassStartedAt, time.Millisecond)
	res, err = storage.RunScrubForTest(s, now.Add(time.Second), 1<<30)
	require.NoError(t, err)
	require.Equal(t, opts.SegmentSize, res.From)
	require.True(t, res.Done)
	require.Equal(t, int64(1), s.ScrubStatus().Passes)
}

// TestScrubberRuns: with the default rate the worker completes a pass of
// a small store on its own.
func TestScrubberRuns(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	s := storagetest.MustOpen(t, opts)
	ms := putNumbered(t, s, "t", 0, 60, 3000)
	require.NoError(t, s.Close())
	damageBody(t, opts.Dir, ms[1])

	opts.ScrubRate = 0 // the default
	s = storagetest.MustOpen(t, opts)
	require.Eventually(t, func() bool { return s.ScrubStatus().Passes > 0 }, 10*time.Second, 10*time.Millisecond)
	st := s.ScrubStatus()
	require.True(t, st.Enabled)
	require.Equal(t, storage.DefaultScrubRate, st.Rate)
	require.Equal(t, int64(1), st.BadFrames)
	require.Equal(t, "scrub", s.Quarantined().Recent[0].Stage)
}

// TestAReplicaMarksItsDamage: on a replicated store the first damaged
// frame found (here by the scrubber) marks the store damaged — Damage is
// closed, config/damaged.json is written, the mark does not travel in a
// copy's metadata files — and Open refuses the store from then on, with
// ErrCorrupt, where a single node's store quarantines the frame and
// opens. A record quarantined for what intact bytes say marks nothing
// (the dispatcher's tests cover those records on a single node).
func TestAReplicaMarksItsDamage(t *testing.T) {
	t.Parallel()
	opts := integrityOptions(t.TempDir())
	opts.Replicated = true
	s, err := storage.Open(opts)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	s.Unfence()
	// A replicated store's writes wait for the commit point: its owner
	// (here, this goroutine) raises it.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				s.SetDispatchLimit(s.WriteOffset())
			}
		}
	}()
	ms := putNumbered(t, s, "t", 0, 20, 3000)
	close(stop)
	s.SetDispatchLimit(s.WriteOffset())
	waitDispatched(t, s, "t", 0, 20)
	select {
	case <-s.Damage():
		t.Fatal("damaged before any damage")
	default:
	}
	_, marked := s.Damaged()
	require.False(t, marked)

	damageBody(t, opts.Dir, ms[5])
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = storage.RunScrubForTest(s, t0, 1<<30)
	require.NoError(t, err)
	select {
	case <-s.Damage():
	default:
		t.Fatal("the scrubber found the damage but the store is not marked")
	}
	rec, marked := s.Damaged()
	require.True(t, marked)
	require.Equal(t, ms[5].PhysicalOffset, rec.Offset)
	require.Equal(t, "scrub", rec.Stage)
	require.FileExists(t, filepath.Join(opts.Dir, "config", "damaged.json"))
	files, err := s.MetaFiles()
	require.NoError(t, err)
	require.NotContains(t, files, "damaged.json", "the mark is this replica's own, not the log's")

	require.NoError(t, s.Close())
	_, err = storage.Open(opts)
	require.ErrorIs(t, err, storage.ErrCorrupt)
	require.ErrorContains(t, err, fmt.Sprintf("offset %d", ms[5].PhysicalOffset))
	require.ErrorContains(t, err, "CRC-32C mismatch")

	// The same data dir as a single node's store: the frame is
	// quarantined, nothing refuses.
	single := opts
	single.Replicated = false
	s2 := storagetest.MustOpen(t, single)
	require.NoError(t, s2.Close())
}
