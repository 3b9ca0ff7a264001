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

// The transaction crash test is real: a child process (this test binary,
// re-executed) sends transactional messages, commits some, rolls some
// back, leaves the rest unresolved and pulls their checks, printing every
// step before it starts and once it is acknowledged; the parent kill -9s
// it at a random moment, several rounds on one directory (each child
// recovers from the last kill, with a snapshot written every 20 ms in
// between), then opens the broker itself and checks every transaction:
// an acknowledged commit is committed and its message delivered exactly
// once, an acknowledged rollback never delivered, an unresolved one still
// pending (with at least the checks acknowledged) and invisible until the
// parent commits it, and no message delivered twice.

const txnCrashEnv = "MQGATE_TXN_CRASH_DIR"

func txnCrashOptions(dir string) broker.Options {
	o := brokertest.Options(dir)
	o.SnapshotInterval = 20 * time.Millisecond
	o.Storage.CheckpointInterval = 20 * time.Millisecond
	o.TransactionCheckInterval = time.Millisecond
	o.TransactionMaxChecks = broker.MaxTransactionMaxChecks
	return o
}

const txnCrashTopic = "tx"

// TestTxnCrashChild is the child's body; it does nothing in a normal run.
func TestTxnCrashChild(t *testing.T) {
	dir := os.Getenv(txnCrashEnv)
	if dir == "" {
		t.Skip("only runs as the child of TestTransactionsKill9")
	}
	round := os.Getenv("MQGATE_TXN_CRASH_ROUND")
	seed, _ := strconv.ParseUint(round, 10, 64)
	ctx := context.Background()
	b, err := broker.Open(ctx, txnCrashOptions(dir))
	if err != nil {
		fmt.Printf("openerr %v\n", err)
		os.Exit(3)
	}
	say := childSay()
	say("ready")
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for seq := 0; ; seq++ {
				body := fmt.Sprintf("r%s-g%d-%d", round, g, seq)
				after := int64(60_000)
				if rng.IntN(3) == 0 {
					after = 100 + int64(rng.IntN(200)) // checked while it waits
				}
				say("send %s", body)
				res, err := b.Send(ctx, txnCrashTopic, []broker.SendMessage{{Body: []byte(body), Transactional: true, ProducerGroup: "pg", CheckAfterMs: after}})
				if err != nil {
					say("error send %v", err)
					return
				}
				id := res[0].TransactionID
				say("sent %s %s", body, id)
				var end func(context.Context, string) (broker.Transaction, error)
				op, done := "", ""
				switch rng.IntN(3) {
				case 0:
					end, op, done = b.CommitTransaction, "commit", "committed"
				case 1:
					end, op, done = b.RollbackTransaction, "rollback", "rolledback"
				default:
					continue // left unresolved
				}
				say("%s %s", op, id)
				if _, err := end(ctx, id); err != nil {
					say("error %s %v", op, err)
					return
				}
				say("%s %s", done, id)
			}
		})
	}
	wg.Go(func() { // the producer group's check-back
		for {
			checks, err := b.PullTransactionChecks(ctx, "pg", 8, time.Second)
			if err != nil {
				say("error checks %v", err)
				return
			}
			for _, c := range checks {
				say("checked %s %d", c.Transaction.ID, c.Transaction.CheckTimes)
			}
		}
	})
	wg.Wait()
	os.Exit(0)
}

// crashTxn is what the parent knows of one transaction.
type crashTxn struct {
	body                 string
	id                   string
	commit, rollback     bool // begun
	committed, rolledBck bool // acknowledged
	checks               int  // the highest check count acknowledged
}

func TestTransactionsKill9(t *testing.T) {
	if os.Getenv(txnCrashEnv) != "" {
		t.Skip("the child runs TestTxnCrashChild only")
	}
	if testing.Short() {
		t.Skip("spawns processes")
	}
	rounds := 4
	if os.Getenv("LONG") != "" {
		rounds = 25
	}
	dir := t.TempDir()
	byBody := map[string]*crashTxn{}
	byID := map[string]*crashTxn{}
	killRounds(t, "TestTxnCrashChild", txnCrashEnv, "MQGATE_TXN_CRASH_ROUND", dir, rounds, 300*time.Millisecond, func(line string, f []string) {
		switch f[0] {
		case "error":
			t.Fatalf("child: %s", line)
		case "send":
			byBody[f[1]] = &crashTxn{body: f[1]}
		case "sent":
			c := byBody[f[1]]
			c.id = f[2]
			byID[f[2]] = c
		case "commit":
			byID[f[1]].commit = true
		case "committed":
			byID[f[1]].committed = true
		case "rollback":
			byID[f[1]].rollback = true
		case "rolledback":
			byID[f[1]].rolledBck = true
		case "checked":
			n, _ := strconv.Atoi(f[2])
			if c := byID[f[1]]; c != nil { // else its send was not acknowledged (an earlier round)
				c.checks = max(c.checks, n)
			}
		}
	})

	bd := &bundle{dir: dir, ctx: context.Background(), b: brokertest.Open(t, txnCrashOptions(dir))}
	drain := func() map[string]int {
		got := map[string]int{}
		for {
			msgs := bd.pull(t, "g", txnCrashTopic, 32, 300*time.Millisecond, time.Hour)
			if len(msgs) == 0 {
				return got
			}
			for _, m := range msgs {
				got[string(m.Body)]++
				require.Equal(t, byBody[string(m.Body)].id, m.MessageID, "delivered under its transaction id")
			}
			_, err := bd.b.Ack(bd.ctx, "g", receipts(msgs))
			require.NoError(t, err)
		}
	}
	delivered := drain()
	var committed, rolledBack, pending, checked int
	var resolve []*crashTxn
	for body, c := range byBody {
		require.LessOrEqual(t, delivered[body], 1, "%s delivered twice", body)
		if c.id == "" {
			continue // its send was not acknowledged: either outcome is right
		}
		tx, err := bd.b.GetTransaction(bd.ctx, c.id)
		require.NoError(t, err, body)
		switch {
		case c.committed:
			require.Equal(t, broker.TxnCommitted, tx.State, body)
			require.Equal(t, 1, delivered[body], "committed %s not delivered once", body)
			again, err := bd.b.CommitTransaction(bd.ctx, c.id)
			require.NoError(t, err, "a repeated commit of %s", body)
			require.Equal(t, broker.TxnCommitted, again.State)
			committed++
		case c.rolledBck:
			require.Equal(t, broker.TxnRolledBack, tx.State, body)
			require.Zero(t, delivered[body], "rolled-back %s delivered", body)
			rolledBack++
		case c.commit:
			require.NotEqual(t, broker.TxnRolledBack, tx.State, "%s rolled back by a commit", body)
			require.Equal(t, tx.State == broker.TxnCommitted, delivered[body] == 1, body)
			if tx.State == broker.TxnPending {
				resolve = append(resolve, c)
			}
		case c.rollback:
			require.NotEqual(t, broker.TxnCommitted, tx.State, "%s committed by a rollback", body)
			require.Zero(t, delivered[body], body)
		default:
			require.Equal(t, broker.TxnPending, tx.State, "unresolved %s", body)
			require.Zero(t, delivered[body], "unresolved %s delivered", body)
			require.GreaterOrEqual(t, tx.CheckTimes, c.checks, "%s lost an acknowledged check", body)
			if c.checks > 0 {
				checked++
			}
			pending++
			resolve = append(resolve, c)
		}
	}
	for _, c := range resolve {
		_, err := bd.b.CommitTransaction(bd.ctx, c.id)
		require.NoError(t, err, c.body)
	}
	after := drain()
	for _, c := range resolve {
		require.Equal(t, 1, after[c.body], "%s delivered once after its commit", c.body)
	}
	for body, n := range after {
		require.Zero(t, delivered[body], "%s delivered again", body)
		require.Equal(t, 1, n)
	}
	t.Logf("%d transactions: %d committed, %d rolled back, %d unresolved across the kills (%d of them checked), %d resolved after",
		len(byBody), committed, rolledBack, pending, checked, len(resolve))
	require.Positive(t, committed)
	require.Positive(t, pending)
	_, err := bd.b.GetTransaction(bd.ctx, "7F00000100001F900000000FFFFFFFFF")
	require.True(t, errors.Is(err, broker.ErrTransactionNotFound), "%v", err)
}
