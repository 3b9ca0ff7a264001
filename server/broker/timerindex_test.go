package broker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// timerIndexOptions are test options with a tiny timer buffer, so the
// index writes runs and merges them.
func timerIndexOptions(dir string) broker.Options {
	o := brokertest.Options(dir)
	o.TimerIndexBuffer = 16
	return o
}

type timerView struct {
	ID, Topic string
	DeliverAt time.Time
}

// listAll pages through ListTimers (7 a page) and returns what it lists.
func (bd *bundle) listAll(t *testing.T, topic string) []timerView {
	t.Helper()
	var out []timerView
	cursor := ""
	for {
		page, next, err := bd.b.ListTimers(bd.ctx, topic, cursor, 7)
		require.NoError(t, err)
		for _, tm := range page {
			out = append(out, timerView{tm.ID, tm.Topic, tm.DeliverAt})
		}
		if next == "" {
			return out
		}
		require.Len(t, page, 7)
		cursor = next
	}
}

// sendTimers registers n timers on topic, due one second apart from at
// (in a shuffled order), and returns their ids by due order.
func (bd *bundle) sendTimers(t *testing.T, topic string, n int, at time.Time) []string {
	t.Helper()
	ids := make([]string, n)
	msgs := make([]broker.SendMessage, n)
	order := make([]int, n)
	for i := range order {
		order[i] = (i * 7919) % n // a permutation when n is not a multiple of 7919
	}
	for j, i := range order {
		msgs[j] = broker.SendMessage{Body: []byte(fmt.Sprint(topic, "-", i)), DeliverAt: at.Add(time.Duration(i) * time.Second)}
	}
	res, err := bd.b.Send(bd.ctx, topic, msgs)
	require.NoError(t, err)
	for j, i := range order {
		ids[i] = res[j].MessageID
	}
	return ids
}

// The timer index across restarts: a clean restart reads no timer or
// status record (the index opens at its checkpoint); a crash replays what
// the last checkpoint missed; a lost, damaged or stale index is rebuilt
// from the timer queues. Each time the same timers are pending with the
// same due times, listed soonest first across pages and per topic, and
// counted per topic.
func TestTimersIndexRecovery(t *testing.T) {
	top, dir := t, t.TempDir() // brokers and directories outlive the subtests
	bd := &bundle{dir: dir, ctx: context.Background(), b: brokertest.Open(t, timerIndexOptions(dir))}
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	a := bd.sendTimers(t, "ta", 60, at)
	b := bd.sendTimers(t, "tb", 40, at.Add(500*time.Millisecond))
	for _, id := range a[:10] {
		require.NoError(t, bd.b.CancelTimer(bd.ctx, id))
	}
	for i, id := range b[:5] {
		_, err := bd.b.RescheduleTimer(bd.ctx, id, at.Add(2*time.Hour+time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
	want := bd.listAll(t, "")
	wantA, wantB := bd.listAll(t, "ta"), bd.listAll(t, "tb")
	require.Len(t, want, 90)
	require.Len(t, wantA, 50)
	require.Len(t, wantB, 40)
	require.Equal(t, b[5], want[0].ID, "soonest first: b[5] at +5.5 s, before a[10] at +10 s")
	require.Equal(t, b[4], want[89].ID, "the latest reschedule is last")
	check := func(t *testing.T) {
		t.Helper()
		require.Equal(t, want, bd.listAll(t, ""))
		require.Equal(t, wantA, bd.listAll(t, "ta"))
		require.Equal(t, wantB, bd.listAll(t, "tb"))
		n, next := bd.b.TimerCount()
		require.Equal(t, 90, n)
		require.Equal(t, want[0].DeliverAt, next.UTC())
	}
	check(t)

	t.Run("CleanRestartReadsNoTimerRecord", func(t *testing.T) {
		require.NoError(t, bd.b.Close(bd.ctx))
		bd.b = brokertest.Open(top, timerIndexOptions(dir))
		require.Equal(t, broker.TimerRecovery{Took: bd.b.TimerRecovered().Took}, bd.b.TimerRecovered())
		check(t)
	})
	t.Run("CrashReplaysTheTail", func(t *testing.T) {
		bd.crashImage(top, timerIndexOptions)
		rec := bd.b.TimerRecovered()
		require.False(t, rec.Rebuilt, "%+v", rec)
		check(t)
	})
	damage := map[string]func(t *testing.T, idx string){
		"Lost": func(t *testing.T, idx string) { require.NoError(t, os.RemoveAll(idx)) },
		"RunGarbled": func(t *testing.T, idx string) {
			runs, err := filepath.Glob(filepath.Join(idx, "*.run"))
			require.NoError(t, err)
			require.NotEmpty(t, runs)
			data, err := os.ReadFile(runs[len(runs)-1])
			require.NoError(t, err)
			data[len(data)-3] ^= 0xFF
			require.NoError(t, os.WriteFile(runs[len(runs)-1], data, 0o644))
		},
		"CheckpointTruncated": func(t *testing.T, idx string) {
			require.NoError(t, os.Truncate(filepath.Join(idx, "CHECKPOINT"), 30))
		},
		"CheckpointFromAnotherLog": func(t *testing.T, idx string) {
			// The index of a different data dir: its marks name other records.
			other := t.TempDir()
			ob := brokertest.Open(t, timerIndexOptions(other))
			_, err := ob.Send(context.Background(), "x", []broker.SendMessage{{Body: []byte("pad"), DelayMs: 1}, {Body: []byte("y"), DelayMs: 3_600_000}})
			require.NoError(t, err)
			require.NoError(t, ob.Close(context.Background()))
			require.NoError(t, os.RemoveAll(idx))
			require.NoError(t, os.Rename(filepath.Join(other, "timers"), idx))
		},
	}
	for name, fn := range damage {
		t.Run("Rebuilt"+name, func(t *testing.T) {
			require.NoError(t, bd.b.Close(bd.ctx))
			fn(t, filepath.Join(bd.dir, "timers"))
			bd.b = brokertest.Open(top, timerIndexOptions(bd.dir))
			rec := bd.b.TimerRecovered()
			require.True(t, rec.Rebuilt, "%+v", rec)
			require.EqualValues(t, 105, rec.Births, "every timer record: 100 sent, 5 rescheduled")
			check(t)
		})
	}

	t.Run("DeliveredOnce", func(t *testing.T) {
		for _, tm := range want {
			_, err := bd.b.RescheduleTimer(bd.ctx, tm.ID, time.Now())
			require.NoError(t, err)
		}
		got := map[string]int{}
		deadline := time.Now().Add(10 * time.Second)
		for len(got) < 90 && time.Now().Before(deadline) {
			for _, topic := range []string{"ta", "tb"} {
				for _, m := range bd.pull(t, "g", topic, 32, 100*time.Millisecond, time.Minute) {
					got[string(m.Body)]++
					_, err := bd.b.Ack(bd.ctx, "g", []string{m.Receipt})
					require.NoError(t, err)
				}
			}
		}
		require.Len(t, got, 90)
		for body, n := range got {
			require.Equal(t, 1, n, body)
		}
		n, _ := bd.b.TimerCount()
		require.Zero(t, n)
		require.NoError(t, bd.b.Close(bd.ctx))
		bd.b = brokertest.Open(top, timerIndexOptions(bd.dir))
		require.Empty(t, bd.pull(t, "g", "ta", 10, 300*time.Millisecond, time.Minute), "delivered once, also after a restart")
		require.Empty(t, bd.listAll(t, ""))
	})
}

// Retention carries every pending timer (a copy that supersedes its
// record) as often as it deletes the segments holding them: the same
// timers stay pending, listed and counted, across restarts and crashes.
func TestTimersCarriedPastRetention(t *testing.T) {
	opts := retentionOptions(t)
	opts.TimerIndexBuffer = 16
	optsFor := func(dir string) broker.Options { o := opts; o.DataDir = dir; return o }
	bd := &bundle{dir: opts.DataDir, ctx: context.Background(), b: brokertest.Open(t, opts)}
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	var ids []string
	for _, topic := range []string{"ca", "cb", "cc"} {
		ids = append(ids, bd.sendTimers(t, topic, 100, at)...)
	}
	for i := 0; i < 30; i++ {
		require.NoError(t, bd.b.CancelTimer(bd.ctx, ids[i*10]))
		_, err := bd.b.RescheduleTimer(bd.ctx, ids[i*10+1], at.Add(time.Duration(i)*time.Minute))
		require.NoError(t, err)
	}
	want := bd.listAll(t, "")
	require.Len(t, want, 270)
	wantB := bd.listAll(t, "cb")
	for round := 0; round < 3; round++ {
		bd.rollAndExpire(t, 20*time.Second)
		require.Equal(t, want, bd.listAll(t, ""), "round %d", round)
		require.Equal(t, wantB, bd.listAll(t, "cb"))
	}
	p, err := bd.b.Backlog(bd.ctx, "g-none")
	if err == nil {
		require.Zero(t, p.Timers, "a group consuming nothing counts no timer")
	}
	bd.crashImage(t, optsFor)
	require.Equal(t, want, bd.listAll(t, ""))
	require.NoError(t, bd.b.Close(bd.ctx))
	bd.b = brokertest.Open(t, optsFor(bd.dir))
	require.Zero(t, bd.b.TimerRecovered().Births, "%+v", bd.b.TimerRecovered())
	require.Equal(t, want, bd.listAll(t, ""))
	n, _ := bd.b.TimerCount()
	require.Equal(t, 270, n)
	tm, err := bd.b.GetTimer(bd.ctx, ids[11])
	require.NoError(t, err, "a carried timer is found by its id")
	require.Equal(t, at.Add(time.Minute).UTC(), tm.DeliverAt)
}
