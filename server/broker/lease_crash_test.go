package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// The lease crash test is real: a child process (this test binary,
// re-executed) sends messages, then more all the time, and pulls them
// with leases of 2–3 s from three consumers, acking some and extending some, and prints every lease
// once its pull has answered (so, in sync mode, once it is on disk). The
// parent kill -9s it at a random moment, opens the broker itself and
// checks, for every lease still running: the message is not delivered to
// another pull before the lease ends, the receipt of before the crash acks
// ok (for half of them), and the other half come back through the retry
// path once their lease is over. Then the next round's child recovers
// from the same directory.

const leaseCrashEnv = "MQGATE_LEASE_CRASH_DIR"

// TestLeaseCrashChild is the child's body; it does nothing in a normal run.
func TestLeaseCrashChild(t *testing.T) {
	dir := os.Getenv(leaseCrashEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestLeasesKill9")
	}
	round := os.Getenv("MQGATE_LEASE_CRASH_ROUND")
	seed, _ := strconv.ParseUint(round, 10, 64)
	ctx := context.Background()
	b, err := broker.Open(ctx, snapshotRaceOptions(dir))
	if err != nil {
		fmt.Printf("openerr %v\n", err)
		os.Exit(3)
	}
	say := childSay()
	msgs := make([]broker.SendMessage, 120)
	for i := range msgs {
		msgs[i] = broker.SendMessage{Body: fmt.Appendf(nil, "r%s-%03d", round, i)}
	}
	if _, err := b.Send(ctx, "lc", msgs); err != nil {
		say("error send %v", err)
		os.Exit(3)
	}
	say("ready")
	var wg sync.WaitGroup
	wg.Go(func() { // more to lease until the kill, so that it strikes mid-pull
		for i := 0; ; i++ {
			batch := make([]broker.SendMessage, 4)
			for j := range batch {
				batch[j] = broker.SendMessage{Body: fmt.Appendf(nil, "r%s-p%d-%d", round, i, j)}
			}
			if _, err := b.Send(ctx, "lc", batch); err != nil {
				say("error send %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond) // a steady trickle, not a flood
		}
	})
	for c := 0; c < 3; c++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for {
				inv := time.Duration(2000+rng.IntN(1000)) * time.Millisecond
				start := time.Now()
				got, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "lc", MaxMessages: 1 + rng.IntN(6), Wait: 50 * time.Millisecond, Invisible: inv})
				if err != nil {
					say("error pull %v", err)
					return
				}
				for _, m := range got {
					say("lease %s %s %d %d %d", m.Body, m.Receipt, start.UnixMilli(), inv.Milliseconds(), m.ReconsumeTimes)
				}
				for _, m := range got {
					switch rng.IntN(4) {
					case 0:
						// Said before the ack too: a kill between the ack's
						// commit and "acked" leaves it acked but unsaid.
						say("acking %s", m.Body)
						res, err := b.Ack(ctx, "g", []string{m.Receipt})
						if err == nil && res[0].Status == broker.ReceiptOK {
							say("acked %s", m.Body)
						}
					case 1:
						longer := inv + time.Second
						start := time.Now()
						res, err := b.ChangeLease(ctx, "g", []broker.LeaseItem{{Receipt: m.Receipt, Invisible: longer}})
						if err == nil && res[0].Status == broker.ReceiptOK {
							say("changed %s %d %d", m.Body, start.UnixMilli(), longer.Milliseconds())
						}
					}
				}
			}
		})
	}
	wg.Wait()
	os.Exit(4)
}

// crashLease is the newest lease the child reported for a body.
type crashLease struct {
	receipt   string
	notBefore time.Time // the lease ends no earlier
	recon     int32
	acked     bool
	uncertain bool // an ack was under way at the kill: acked or not, either is right
}

func TestLeasesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	rounds := 2
	if os.Getenv("LONG") != "" {
		rounds = 6
	}
	dir := t.TempDir()
	ctx := context.Background()
	checked, acked, redelivered := 0, 0, 0
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseCrashChild$")
		cmd.Env = append(os.Environ(), leaseCrashEnv+"="+dir, fmt.Sprintf("MQGATE_LEASE_CRASH_ROUND=%d", round))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := make(chan string, 1<<16)
		go func() {
			sc := bufio.NewScanner(out)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var log []string
		ready := time.After(30 * time.Second)
	waitReady:
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "child exited before it was ready: %v", log)
				log = append(log, l)
				if l == "ready" {
					break waitReady
				}
			case <-ready:
				t.Fatal("child not ready")
			}
		}
		time.Sleep(time.Duration(300+rand.IntN(500)) * time.Millisecond) // on purpose: the child runs until a random kill
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		for l := range lines {
			log = append(log, l)
		}
		leases := map[string]*crashLease{}
		for _, l := range log {
			f := strings.Fields(l)
			if len(f) == 0 {
				continue
			}
			switch {
			case f[0] == "lease" && len(f) == 6:
				start, _ := strconv.ParseInt(f[3], 10, 64)
				inv, _ := strconv.ParseInt(f[4], 10, 64)
				recon, _ := strconv.Atoi(f[5])
				leases[f[1]] = &crashLease{receipt: f[2], notBefore: time.UnixMilli(start + inv), recon: int32(recon)}
			case f[0] == "acking" && len(f) == 2 && leases[f[1]] != nil:
				leases[f[1]].uncertain = true
			case f[0] == "acked" && len(f) == 2 && leases[f[1]] != nil:
				leases[f[1]].acked = true
				leases[f[1]].uncertain = false
			case f[0] == "changed" && len(f) == 4 && leases[f[1]] != nil:
				start, _ := strconv.ParseInt(f[2], 10, 64)
				inv, _ := strconv.ParseInt(f[3], 10, 64)
				if nb := time.UnixMilli(start + inv); nb.After(leases[f[1]].notBefore) {
					leases[f[1]].notBefore = nb
				}
			case strings.HasPrefix(f[0], "error"), f[0] == "openerr":
				t.Fatalf("round %d child: %s", round, l)
			}
		}

		b := brokertest.Open(t, snapshotRaceOptions(dir))
		opened := time.Now()
		t.Logf("round %d: %d leases reported; recovered %+v", round, len(leases), b.LeasesRecovered())
		// Every lease still running must hold: pull everything available
		// for a while and look for any of them.
		live := map[string]*crashLease{}
		for body, l := range leases {
			if !l.acked && !l.uncertain && l.notBefore.After(opened.Add(time.Second)) {
				live[body] = l
			}
		}
		require.NotEmpty(t, live, "round %d: no lease outlived the restart (the test checks nothing)", round)
		// A pull that returned before a lease's end delivered early (the
		// check is lenient by the pull's own duration, a few ms).
		var pulled []broker.ReceivedMessage
		for time.Since(opened) < 500*time.Millisecond {
			got, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "lc", MaxMessages: 32, Wait: 20 * time.Millisecond, Invisible: time.Hour})
			returned := time.Now()
			require.NoError(t, err)
			for _, m := range got {
				if l := live[string(m.Body)]; l != nil && returned.Before(l.notBefore) {
					t.Fatalf("round %d: %s delivered %v before its lease (granted before the kill) ended; the child said %v",
						round, m.Body, l.notBefore.Sub(returned), linesOf(log, string(m.Body)))
				}
			}
			pulled = append(pulled, got...)
		}
		// Half the running leases: their receipts of before the crash ack ok.
		// A lease about to end is kept instead: its ack would race its end
		// (a loaded machine spends the second of slack above on the pulls
		// and the acks before it).
		var keep []string
		n := 0
		for body, l := range live {
			n++
			if n%2 == 0 || !l.notBefore.After(time.Now().Add(250*time.Millisecond)) {
				keep = append(keep, body)
				continue
			}
			res, err := b.Ack(ctx, "g", []string{l.receipt})
			require.NoError(t, err)
			require.Equal(t, broker.ReceiptOK, res[0].Status, "round %d: the receipt of %s (lease until %v) after the crash: %s", round, body, l.notBefore, res[0].Error)
			acked++
		}
		checked += len(live)
		// The other half come back through the retry path once their lease is over.
		waiting := map[string]bool{}
		for _, body := range keep {
			waiting[body] = true
		}
		brokertest.Eventually(t, 20*time.Second, func() (bool, string) {
			got, err := b.Pull(ctx, broker.PullRequest{Group: "g", Topic: "lc", MaxMessages: 32, Wait: 20 * time.Millisecond, Invisible: time.Hour})
			returned := time.Now()
			require.NoError(t, err)
			for _, m := range got {
				if l := live[string(m.Body)]; l != nil && waiting[string(m.Body)] {
					require.False(t, returned.Before(l.notBefore), "round %d: %s delivered %v before its lease ended; the child said %v",
						round, m.Body, l.notBefore.Sub(returned), linesOf(log, string(m.Body)))
					require.Greater(t, m.ReconsumeTimes, l.recon, "round %d: %s came back without the retry path", round, m.Body)
					delete(waiting, string(m.Body))
					redelivered++
				}
			}
			pulled = append(pulled, got...)
			return len(waiting) == 0, fmt.Sprintf("%d leases of before the crash not delivered again after they ended", len(waiting))
		})
		if len(pulled) > 0 {
			_, err := b.Ack(ctx, "g", receipts(pulled))
			require.NoError(t, err)
		}
		require.NoError(t, b.Close(ctx))
	}
	t.Logf("%d rounds: %d leases running at the crash checked, %d acked with their old receipts, %d redelivered after their lease", rounds, checked, acked, redelivered)
}

// linesOf are the child's lines about body.
func linesOf(log []string, body string) []string {
	var out []string
	for _, l := range log {
		if f := strings.Fields(l); len(f) > 1 && f[1] == body {
			out = append(out, l)
		}
	}
	return out
}
