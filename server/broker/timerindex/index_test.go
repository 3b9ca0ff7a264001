package timerindex

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// scanAll returns every pending entry of topic in due order, in steps of
// step examined entries (resuming from the key Scan returns).
func scanAll(t require.TestingT, x *Index, topic string, step int) []Entry {
	var out []Entry
	after := MinKey
	for {
		last, done, err := x.Scan(after, topic, step, func(e Entry) bool { out = append(out, e); return true })
		require.NoError(t, err)
		if done {
			return out
		}
		after = last
	}
}

type model struct {
	live map[int64]Entry
}

func (m *model) sorted(topic string) []Entry {
	var out []Entry
	for _, e := range m.live {
		if topic == "" || e.Topic == topic {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Key().Less(b.Key()) {
			return -1
		}
		return 1
	})
	return out
}

func (m *model) count(topic string) int64 {
	var n int64
	for _, e := range m.live {
		if e.Topic == topic {
			n++
		}
	}
	return n
}

// The index against a map of pending entries, through births, kills (with
// and without their topic), floor raises, checkpoints, merges and
// reopening (after a clean checkpoint, or after a crash that loses what
// the last checkpoint did not write: the queues are replayed from the
// checkpoint's position, as the broker does).
//
// Quick: 30 checks; LONG=1: 300.
func TestIndexModel(t *testing.T) {
	modelChecks(t, 30, 300)
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "timerindex")
		require.NoError(t, err)
		defer os.RemoveAll(dir)
		opts := Options{Dir: dir, BufferEntries: rapid.IntRange(1, 40).Draw(t, "buffer"), FanIn: rapid.IntRange(2, 4).Draw(t, "fanIn")}
		x, err := Create(opts, Position{TimerMark: NoMark, StatusMark: NoMark})
		require.NoError(t, err)
		defer func() { x.Close() }()

		// The "queues": every birth and kill ever applied, in order.
		var births []Entry
		var kills []Kill
		m := &model{live: map[int64]Entry{}}
		floor := int64(0)
		topics := []string{"a", "b", "c"}
		apply := func(u Update) {
			u.Pos = Position{Timers: int64(len(births)), Statuses: int64(len(kills)), TimerMark: NoMark, StatusMark: NoMark}
			x.Apply(u)
		}
		replay := func(pos Position) {
			u := Update{Births: births[pos.Timers:], Kills: kills[pos.Statuses:], Floor: floor}
			apply(u)
		}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 7).Draw(t, "op") {
			case 0, 1, 2:
				var u Update
				for range rapid.IntRange(1, 30).Draw(t, "births") {
					// Few ids: records of one timer (same id), and ties.
					e := Entry{Due: rapid.Int64Range(0, 100).Draw(t, "due"), ID: rapid.Int64Range(0, 20).Draw(t, "id"),
						Seq: int64(len(births)), Topic: rapid.SampledFrom(topics).Draw(t, "topic")}
					births = append(births, e)
					u.Births = append(u.Births, e)
					if e.Seq >= floor {
						m.live[e.Seq] = e
					}
				}
				apply(u)
			case 3:
				if len(births) == 0 {
					continue
				}
				var u Update
				for range rapid.IntRange(1, 10).Draw(t, "kills") {
					seq := rapid.Int64Range(0, int64(len(births)-1)).Draw(t, "seq")
					k := Kill{Seq: seq, Topic: births[seq].Topic}
					if rapid.IntRange(0, 5).Draw(t, "unknown topic") == 0 {
						k.Topic = ""
					}
					kills = append(kills, k)
					u.Kills = append(u.Kills, k)
					delete(m.live, seq)
				}
				apply(u)
			case 4:
				floor = min(int64(len(births)), floor+rapid.Int64Range(0, 20).Draw(t, "raise"))
				var lost int64
				for seq := range m.live {
					if seq < floor {
						delete(m.live, seq)
						lost++
					}
				}
				require.Equal(t, lost, x.Apply(Update{Floor: floor, Pos: x.Position()}))
			case 5:
				require.NoError(t, x.Checkpoint())
			case 6:
				for {
					merged, err := x.Compact()
					require.NoError(t, err)
					if !merged {
						break
					}
				}
			case 7:
				if rapid.Bool().Draw(t, "clean") {
					require.NoError(t, x.Checkpoint())
				}
				require.NoError(t, x.Close())
				x, err = Open(opts)
				if errors.Is(err, ErrNotFound) { // never checkpointed: rebuild from the queues
					x, err = Create(opts, Position{TimerMark: NoMark, StatusMark: NoMark})
				}
				require.NoError(t, err)
				replay(x.Position())
			}
			require.Equal(t, int64(len(m.live)), x.Count())
			step := rapid.IntRange(0, 7).Draw(t, "scan step")
			require.Equal(t, m.sorted(""), scanAll(t, x, "", step))
			for _, tp := range topics {
				require.Equal(t, m.sorted(tp), scanAll(t, x, tp, step))
			}
			require.NoError(t, x.Checkpoint()) // recounts when a kill had no topic
			for _, tp := range topics {
				require.Equal(t, m.count(tp), x.CountTopic(tp), "topic %s", tp)
			}
			for seq := int64(0); seq < int64(len(births)); seq++ {
				_, live := m.live[seq]
				require.Equal(t, live, x.Live(seq))
			}
		}
	})
}

// Scan from a key resumes after it; merged runs keep every pending entry
// and drop the dead; a run whose entries all died is deleted.
func TestIndexScanMergeAndDrop(t *testing.T) {
	dir := t.TempDir()
	x, err := Create(Options{Dir: dir, BufferEntries: 4, FanIn: 2}, Position{TimerMark: NoMark, StatusMark: NoMark})
	require.NoError(t, err)
	defer x.Close()
	var seq int64
	birth := func(due int64, topic string) {
		x.Apply(Update{Births: []Entry{{Due: due, ID: 1000 + seq, Seq: seq, Topic: topic}}, Pos: Position{Timers: seq + 1}})
		seq++
	}
	for i := 0; i < 4; i++ {
		birth(int64(100-i), "t")
	}
	select {
	case <-x.Full():
	default:
		t.Fatal("a full buffer is signalled")
	}
	require.NoError(t, x.Checkpoint())
	for i := 0; i < 4; i++ {
		birth(int64(50+i), "u")
	}
	require.NoError(t, x.Checkpoint())
	require.Equal(t, 2, x.Stats().Runs)
	merged, err := x.Compact()
	require.NoError(t, err)
	require.True(t, merged)
	require.Equal(t, Stats{Pending: 8, Runs: 1, RunEntries: 8, LiveBytes: x.Stats().LiveBytes, Topics: 2}, x.Stats())

	all := scanAll(t, x, "", 0)
	require.Len(t, all, 8)
	require.Equal(t, int64(50), all[0].Due)
	var page []Entry
	_, _, err = x.Scan(all[2].Key(), "", 0, func(e Entry) bool { page = append(page, e); return len(page) < 2 })
	require.NoError(t, err)
	require.Equal(t, all[3:5], page)
	require.Equal(t, all[:4], scanAll(t, x, "u", 0))
	require.Equal(t, int64(4), x.CountTopic("t"))

	kills := make([]Kill, 0, 8)
	for s := int64(0); s < 8; s++ {
		kills = append(kills, Kill{Seq: s, Topic: map[bool]string{true: "t", false: "u"}[s < 4]})
	}
	x.Apply(Update{Kills: kills, Pos: Position{Timers: 8, Statuses: 8}})
	require.Empty(t, scanAll(t, x, "", 0)) // moves the head to the end
	require.NoError(t, x.Checkpoint())
	require.Equal(t, 0, x.Stats().Runs, "a wholly dead run is deleted")
	names, err := filepath.Glob(filepath.Join(dir, "*.run"))
	require.NoError(t, err)
	require.Empty(t, names)
}

// writeSample builds a checkpointed index with two runs and returns its
// options and run paths.
func writeSample(t *testing.T) (Options, []string) {
	t.Helper()
	opts := Options{Dir: t.TempDir(), BufferEntries: 2}
	x, err := Create(opts, Position{TimerMark: NoMark, StatusMark: NoMark})
	require.NoError(t, err)
	for seq := int64(0); seq < 6; seq++ {
		x.Apply(Update{Births: []Entry{{Due: 10 * seq, ID: seq, Seq: seq, Topic: "t"}}, Pos: Position{Timers: seq + 1, TimerMark: Mark{seq, 100 * seq}, StatusMark: NoMark}})
		if seq%3 == 2 {
			require.NoError(t, x.Checkpoint())
		}
	}
	require.NoError(t, x.Close())
	runs, err := filepath.Glob(filepath.Join(opts.Dir, "*.run"))
	require.NoError(t, err)
	require.Len(t, runs, 2)
	return opts, runs
}

// A lost, truncated, garbled or zeroed file fails Open with ErrCorrupt (the
// broker rebuilds); a missing checkpoint is ErrNotFound; stray files are
// deleted.
func TestIndexOpenDamaged(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		opts, runs := writeSample(t)
		require.NoError(t, os.WriteFile(filepath.Join(opts.Dir, "00000000000000000099.run"), []byte("orphan"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(opts.Dir, "CHECKPOINT.tmp"), []byte("half"), 0o644))
		x, err := Open(opts)
		require.NoError(t, err)
		defer x.Close()
		require.Equal(t, Position{Timers: 6, TimerMark: Mark{5, 500}, StatusMark: NoMark}, x.Position())
		require.Len(t, scanAll(t, x, "t", 0), 6)
		left, err := os.ReadDir(opts.Dir)
		require.NoError(t, err)
		require.Len(t, left, len(runs)+1, "orphans and tmp files removed")
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := Open(Options{Dir: t.TempDir()})
		require.ErrorIs(t, err, ErrNotFound)
	})
	damage := map[string]func(t *testing.T, opts Options, runs []string){
		"RunMissing": func(t *testing.T, _ Options, runs []string) { require.NoError(t, os.Remove(runs[0])) },
		"RunTruncated": func(t *testing.T, _ Options, runs []string) {
			require.NoError(t, os.Truncate(runs[1], runHeaderSize+entrySize))
		},
		"RunGarbled":      func(t *testing.T, _ Options, runs []string) { flipByte(t, runs[0], runHeaderSize+9) },
		"RunHeaderZeroed": func(t *testing.T, _ Options, runs []string) { zeroBytes(t, runs[1], 0, runHeaderSize) },
		"CheckpointGarbled": func(t *testing.T, opts Options, _ []string) {
			flipByte(t, filepath.Join(opts.Dir, checkpointName), checkpointHeader+3)
		},
		"CheckpointTruncated": func(t *testing.T, opts Options, _ []string) {
			require.NoError(t, os.Truncate(filepath.Join(opts.Dir, checkpointName), checkpointHeader+10))
		},
		"CheckpointZeroed": func(t *testing.T, opts Options, _ []string) {
			zeroBytes(t, filepath.Join(opts.Dir, checkpointName), 0, checkpointHeader)
		},
	}
	for name, fn := range damage {
		t.Run("ErrCorrupt"+name, func(t *testing.T) {
			opts, runs := writeSample(t)
			fn(t, opts, runs)
			_, err := Open(opts)
			require.ErrorIs(t, err, ErrCorrupt)
			x, err := Create(opts, Position{TimerMark: NoMark, StatusMark: NoMark}) // what the broker does next
			require.NoError(t, err)
			defer x.Close()
			left, err := os.ReadDir(opts.Dir)
			require.NoError(t, err)
			require.Empty(t, left, "Create starts afresh")
		})
	}
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= 0x5A
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

func zeroBytes(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, n), off)
	require.NoError(t, err)
}

// A checkpoint that cannot be written (its temporary file cannot be
// created) fails without changing what is in memory or on disk; the next
// one writes everything.
func TestIndexCheckpointWriteError(t *testing.T) {
	opts, _ := writeSample(t)
	x, err := Open(opts)
	require.NoError(t, err)
	defer x.Close()
	x.Apply(Update{Births: []Entry{{Due: 1, ID: 6, Seq: 6, Topic: "t"}}, Pos: Position{Timers: 7, TimerMark: Mark{6, 600}, StatusMark: NoMark}})
	blocker := filepath.Join(opts.Dir, checkpointName+tmpSuffix)
	require.NoError(t, os.Mkdir(blocker, 0o755))
	require.Error(t, x.Checkpoint())
	require.Len(t, scanAll(t, x, "", 0), 7, "nothing lost in memory")
	st, err := readState(opts.Dir)
	require.NoError(t, err)
	require.Equal(t, int64(6), st.pos.Timers, "the old checkpoint stands")

	require.NoError(t, os.Remove(blocker))
	require.NoError(t, x.Checkpoint())
	require.NoError(t, x.Close())
	x, err = Open(opts)
	require.NoError(t, err)
	require.Equal(t, int64(7), x.Position().Timers)
	require.Len(t, scanAll(t, x, "", 0), 7)
}

func FuzzDecodeState(f *testing.F) {
	s := &state{pos: Position{Timers: 5, Statuses: 2, TimerMark: Mark{4, 40}, StatusMark: Mark{1, 99}}, nextRun: 3,
		runs: []runMeta{{id: 1, tier: 0, n: 4, head: 1, crc: 7}}, topics: []string{"a"}, counts: []int64{3}, live: newLiveSet(0)}
	for seq := int64(0); seq < 5000; seq += 2 {
		s.live.add(seq)
	}
	f.Add(s.encode())
	s.live = newLiveSet(70000)
	s.live.add(70001)
	f.Add(s.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		again, err := decodeState(st.encode())
		require.NoError(t, err)
		require.Equal(t, st.pos, again.pos)
		require.Equal(t, st.live.total, again.live.total)
	})
}

func FuzzDecodeRunHeader(f *testing.F) {
	f.Add(encodeRunHeader(3, 0xABCD))
	f.Add(make([]byte, runHeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, crc, err := decodeRunHeader(b)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, encodeRunHeader(n, crc), b[:runHeaderSize])
	})
}
