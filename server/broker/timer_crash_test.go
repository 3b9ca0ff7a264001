package broker_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// The timer crash test is real: a child process (this test binary,
// re-executed) sends timers due within a second (and a few due in an
// hour), cancels and reschedules some, while its broker delivers them, and
// prints every step before it starts and once it is acknowledged; the
// parent kill -9s it at a random moment, several rounds on one directory
// (each child recovers from the last kill), then opens the broker itself,
// lets every short timer fall due and checks every delivery: never twice,
// never early, none lost, none of a cancelled timer.

const timerCrashEnv = "MQGATE_TIMER_CRASH_DIR"

func timerCrashOptions(dir string) broker.Options {
	o := brokertest.Options(dir)
	o.TimerIndexBuffer = 32 // runs and merges all the time
	o.SnapshotInterval = 20 * time.Millisecond
	o.Storage.CheckpointInterval = 20 * time.Millisecond
	return o
}

const crashTopics = 3

// TestTimerCrashChild is the child's body; it does nothing in a normal run.
func TestTimerCrashChild(t *testing.T) {
	dir := os.Getenv(timerCrashEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestTimersKill9")
	}
	round := os.Getenv("MQGATE_TIMER_CRASH_ROUND")
	seed, _ := strconv.ParseUint(round, 10, 64)
	ctx := context.Background()
	b, err := broker.Open(ctx, timerCrashOptions(dir))
	if err != nil {
		fmt.Printf("openerr %v\n", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	var ids []string
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	pick := func(rng *rand.Rand) string {
		mu.Lock()
		defer mu.Unlock()
		if len(ids) == 0 {
			return ""
		}
		return ids[rng.IntN(len(ids))]
	}
	say("ready")
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for seq := 0; ; seq++ {
				n := 1 + rng.IntN(4)
				msgs := make([]broker.SendMessage, n)
				topic := fmt.Sprint("crash", rng.IntN(crashTopics))
				for i := range msgs {
					delay := time.Duration(20+rng.IntN(800)) * time.Millisecond
					if rng.IntN(10) == 0 {
						delay = time.Hour
					}
					due := time.Now().Add(delay).Truncate(time.Millisecond)
					body := fmt.Sprintf("r%s-g%d-%d-%d", round, g, seq, i)
					msgs[i] = broker.SendMessage{Body: []byte(body), DeliverAt: due}
					say("send %s %d", body, due.UnixMilli())
				}
				res, err := b.Send(ctx, topic, msgs)
				if err != nil {
					say("error send %v", err)
					return
				}
				for i, r := range res {
					say("sent %s %s", msgs[i].Body, r.MessageID)
					mu.Lock()
					ids = append(ids, r.MessageID)
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() { // cancels, one every 2 ms
		rng := rand.New(rand.NewPCG(seed, 100))
		for range time.Tick(2 * time.Millisecond) {
			id := pick(rng)
			if id == "" {
				continue // nothing sent yet
			}
			say("cancel %s", id)
			switch err := b.CancelTimer(ctx, id); {
			case err == nil:
				say("cancelled %s", id)
			case errors.Is(err, broker.ErrMessageNotFound):
				say("cancel-missed %s", id)
			default:
				say("error cancel %v", err)
				return
			}
		}
	})
	wg.Go(func() { // reschedules, earlier or later, one every 2 ms
		rng := rand.New(rand.NewPCG(seed, 200))
		for range time.Tick(2 * time.Millisecond) {
			id := pick(rng)
			if id == "" {
				continue
			}
			due := time.Now().Add(time.Duration(20+rng.IntN(800)) * time.Millisecond).Truncate(time.Millisecond)
			say("resched %s %d", id, due.UnixMilli())
			switch _, err := b.RescheduleTimer(ctx, id, due); {
			case err == nil:
				say("rescheduled %s %d", id, due.UnixMilli())
			case errors.Is(err, broker.ErrMessageNotFound):
			default:
				say("error resched %v", err)
				return
			}
		}
	})
	wg.Wait()
	os.Exit(0)
}

// crashTimer is what the parent knows of one timer from the children's
// output.
type crashTimer struct {
	body       string
	acked      bool    // its send returned
	dues       []int64 // when it may fire: the last acknowledged due, then every due tried since
	cancelled  bool    // a cancel was acknowledged
	unanswered int     // cancels tried that a kill left without an answer
}

func (c *crashTimer) earliest() int64 { return minOf(c.dues) }

func minOf(v []int64) int64 {
	m := v[0]
	for _, x := range v[1:] {
		m = min(m, x)
	}
	return m
}

func TestTimersKill9(t *testing.T) {
	if os.Getenv(timerCrashEnv) != "" {
		t.Skip("the child runs TestTimerCrashChild only")
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	rounds := 5
	if os.Getenv("LONG") != "" {
		rounds = 30
	}
	dir := t.TempDir()
	byBody := map[string]*crashTimer{}
	byID := map[string]*crashTimer{}
	killRounds(t, "TestTimerCrashChild", timerCrashEnv, "MQGATE_TIMER_CRASH_ROUND", dir, rounds, 200*time.Millisecond, func(line string, f []string) {
		switch f[0] {
		case "error":
			t.Fatalf("child: %s", line)
		case "send":
			due, _ := strconv.ParseInt(f[2], 10, 64)
			byBody[f[1]] = &crashTimer{body: f[1], dues: []int64{due}}
		case "sent":
			c := byBody[f[1]]
			c.acked = true
			byID[f[2]] = c
		case "cancel":
			byID[f[1]].unanswered++
		case "cancelled":
			c := byID[f[1]]
			c.cancelled = true
			c.unanswered--
		case "cancel-missed": // it was delivered, or in flight: the attempt changed nothing
			byID[f[1]].unanswered--
		case "resched":
			due, _ := strconv.ParseInt(f[2], 10, 64)
			c := byID[f[1]]
			c.dues = append(c.dues, due)
		case "rescheduled":
			due, _ := strconv.ParseInt(f[2], 10, 64)
			byID[f[1]].dues = []int64{due}
		}
	})

	bd := &bundle{dir: dir, ctx: context.Background(), b: brokertest.Open(t, timerCrashOptions(dir))}
	horizon := time.Now().Add(30 * time.Minute)
	require.Eventually(t, func() bool {
		_, next := bd.b.TimerCount()
		return next.IsZero() || next.After(horizon)
	}, 20*time.Second, 20*time.Millisecond, "every short timer falls due")
	delivered := map[string][]broker.ReceivedMessage{}
	for topic := 0; topic < crashTopics; topic++ {
		for {
			got := bd.pull(t, "check", fmt.Sprint("crash", topic), 32, 200*time.Millisecond, time.Hour)
			if len(got) == 0 {
				break
			}
			for _, m := range got {
				delivered[string(m.Body)] = append(delivered[string(m.Body)], m)
			}
		}
	}
	pending := map[string]bool{}
	for _, tm := range bd.listAll(t, "") {
		pending[tm.ID] = true
	}
	idOf := map[*crashTimer]string{}
	for id, c := range byID {
		idOf[c] = id
	}
	var once, cancelled, long int
	for body, c := range byBody {
		got := delivered[body]
		require.LessOrEqual(t, len(got), 1, "timer %s delivered %d times", body, len(got))
		if len(got) == 1 {
			require.GreaterOrEqual(t, got[0].StoredAt.UnixMilli(), c.earliest(), "timer %s delivered early", body)
			require.False(t, c.cancelled, "timer %s delivered after its cancellation was acknowledged", body)
			require.False(t, pending[idOf[c]], "timer %s delivered and still pending", body)
			once++
		}
		if !c.acked || c.unanswered > 0 && !c.cancelled {
			continue // either outcome is right
		}
		switch {
		case c.cancelled:
			require.Empty(t, got, "cancelled timer %s delivered", body)
			require.False(t, pending[idOf[c]], "cancelled timer %s still pending", body)
			cancelled++
		case minOf(c.dues) > horizon.UnixMilli():
			require.Empty(t, got, "timer %s delivered an hour early", body)
			require.True(t, pending[idOf[c]], "timer %s lost", body)
			long++
		case maxOf(c.dues) < horizon.UnixMilli():
			require.Len(t, got, 1, "timer %s lost", body)
		}
	}
	t.Logf("%d timers: %d delivered once, %d cancelled, %d still pending an hour out", len(byBody), once, cancelled, long)
	require.Positive(t, once)
}

func maxOf(v []int64) int64 {
	m := v[0]
	for _, x := range v[1:] {
		m = max(m, x)
	}
	return m
}
