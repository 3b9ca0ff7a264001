package broker_test

import (
	"context"
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

// The broadcast crash test is real: a child process (this test binary,
// re-executed) sends all the time and two consumer instances of a
// broadcasting group pull with 1 s leases, ack three in four messages and
// let the others' leases run out (retried in place), printing every
// delivery and every ack once it answered (in sync mode: on disk). The
// parent kill -9s it at a random moment, several rounds over the same
// directory. No message an instance acked is delivered to that instance
// again, by a later round or after the last; every message sent is, for
// each instance, acked (or its ack asked for, when the kill cut the
// answer off) or delivered to it after the last kill.

const broadcastCrashEnv = "MQGATE_BROADCAST_CRASH_DIR"

// TestBroadcastCrashChild is the child's body; it does nothing in a normal run.
func TestBroadcastCrashChild(t *testing.T) {
	dir := os.Getenv(broadcastCrashEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestBroadcastKill9")
	}
	round := os.Getenv("MQGATE_BROADCAST_CRASH_ROUND")
	seed, _ := strconv.ParseUint(round, 10, 64)
	ctx := context.Background()
	b, err := broker.Open(ctx, snapshotRaceOptions(dir))
	if err != nil {
		fmt.Printf("error open %v\n", err)
		os.Exit(3)
	}
	say := childSay()
	if _, _, err := b.PutTopic(ctx, broker.TopicConfig{Name: "bk", Queues: 3}); err != nil {
		say("error topic %v", err)
		os.Exit(3)
	}
	if _, _, err := b.PutGroup(ctx, broker.GroupConfig{Name: "fan", ConsumeMode: broker.ConsumeBroadcasting, RetryMaxTimes: 64,
		Subscriptions: []broker.Subscription{{Topic: "bk"}}}); err != nil {
		say("error group %v", err)
		os.Exit(3)
	}
	say("ready")
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			batch := make([]broker.SendMessage, 4)
			for j := range batch {
				batch[j] = broker.SendMessage{Body: fmt.Appendf(nil, "r%s-%d-%d", round, i, j)}
			}
			if _, err := b.Send(ctx, "bk", batch); err != nil {
				say("error send %v", err)
				return
			}
			for _, m := range batch {
				say("sent %s", m.Body)
			}
			time.Sleep(3 * time.Millisecond) // a steady trickle, not a flood
		}
	})
	for c, client := range []string{"a", "b"} {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			cctx := broker.WithClient(ctx, client)
			for {
				got, err := b.Pull(cctx, broker.PullRequest{Group: "fan", Topic: "bk", MaxMessages: 8, Wait: 50 * time.Millisecond, Invisible: time.Second})
				if err != nil {
					say("error pull %v", err)
					return
				}
				var acks []broker.ReceivedMessage
				for _, m := range got {
					say("got %s %s", client, m.Body)
					if rng.IntN(4) > 0 {
						acks = append(acks, m)
					}
				}
				if len(acks) == 0 {
					continue
				}
				for _, m := range acks {
					say("ack %s %s", client, m.Body) // outcome unknown until "acked"
				}
				res, err := b.Ack(cctx, "fan", receipts(acks))
				if err != nil {
					say("error ack %v", err)
					return
				}
				for i, r := range res {
					if r.Status == broker.ReceiptOK {
						say("acked %s %s", client, acks[i].Body)
					}
				}
			}
		})
	}
	wg.Wait()
	os.Exit(4)
}

func TestBroadcastKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	rounds := 3
	if os.Getenv("LONG") != "" {
		rounds = 8
	}
	dir := t.TempDir()
	sent := map[string]bool{}
	acked := map[string]map[string]bool{"a": {}, "b": {}}
	acking := map[string]map[string]bool{"a": {}, "b": {}} // acks asked for: done or not, the kill may tell neither
	deliveries := 0
	killRounds(t, "TestBroadcastCrashChild", broadcastCrashEnv, "MQGATE_BROADCAST_CRASH_ROUND", dir, rounds, 300*time.Millisecond, func(line string, f []string) {
		switch {
		case f[0] == "error":
			t.Fatalf("child: %s", line)
		case f[0] == "sent" && len(f) == 2:
			sent[f[1]] = true
		case f[0] == "got" && len(f) == 3:
			require.False(t, acked[f[1]][f[2]], "%s delivered again to %s, which had acked it", f[2], f[1])
			deliveries++
		case f[0] == "ack" && len(f) == 3:
			acking[f[1]][f[2]] = true
		case f[0] == "acked" && len(f) == 3:
			acked[f[1]][f[2]] = true
		}
	})
	require.NotEmpty(t, sent)

	bd := &bundle{dir: dir, ctx: context.Background(), b: brokertest.Open(t, snapshotRaceOptions(dir))}
	opened := time.Now()
	for _, client := range []string{"a", "b"} {
		in := bd.instance("fan", client)
		drained := map[string]bool{}
		// Leases of before the kill end within a second: drain past that.
		for {
			past := time.Since(opened) > 1500*time.Millisecond
			got := in.pull(t, "bk", 32, 100*time.Millisecond, time.Minute)
			if len(got) == 0 && past {
				break
			}
			for _, m := range got {
				body := string(m.Body)
				require.False(t, acked[client][body], "%s delivered to %s after the last kill, which had acked it", body, client)
				drained[body] = true
			}
			if len(got) > 0 {
				in.ack(t, got...)
			}
		}
		missing := 0
		for body := range sent {
			if !acked[client][body] && !acking[client][body] && !drained[body] {
				missing++
			}
		}
		require.Zero(t, missing, "messages sent that %s neither acked nor got after the last kill", client)
		require.Zero(t, in.lag(t))
		t.Logf("instance %s: %d acked before the kills, %d delivered after the last", client, len(acked[client]), len(drained))
	}
	t.Logf("%d rounds: %d messages sent, %d deliveries", rounds, len(sent), deliveries)
}
