package broker

import (
	"context"
	"time"

	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// Transactional (half) messages, RocketMQ's TransactionMQProducer: the
// facade of the transaction family, server/broker/txn, which holds the
// records' codecs, the state of the unresolved transactions and its
// apply, following the two queues into it, the snapshot file, the
// requests (a transactional send's checks, commit, rollback, describe,
// the check pulls), the leader's roll-back loop and retention's carry
// (server/broker/txn/doc.go). What stays here: the exported requests,
// which check that the broker is open and delegate; the family's Config,
// filled in from the broker (its store, clock, log and options, the
// registry's word on a topic, the topic gate, the sentinels); the quotas
// on unresolved transactions; what a send and a pull render (a duplicate
// send's result, a check's half message); and the entry points the
// broker's other files call.
//
// A transactional send stores the message as a half message in the
// system topic rmq_sys_TRANS_HALF (queue 0), with its destination in
// REAL_TOPIC / REAL_QID and its producer group in TRAN_PGROUP; no group
// reads that topic, so the message is invisible until the transaction
// ends. Its id (the send's messageId) is the transaction id.

// The family's topics and half-message properties (package txn).
const (
	txnHalfTopic = txn.HalfTopic
	txnOpTopic   = txn.OpTopic

	propTxnID         = txn.PropID
	propTxnGroup      = txn.PropGroup
	propTxnCheckAfter = txn.PropCheckAfter
	propTxnChecks     = txn.PropChecks
	propTxnNextCheck  = txn.PropNextCheck
)

// Transaction limits and defaults.
const (
	// DefaultCheckAfter is a transactional send's checkAfterMs when it
	// gives none (RocketMQ's transactionTimeOut).
	DefaultCheckAfter = txn.DefaultCheckAfter
	// MinCheckAfter and MaxCheckAfter bound checkAfterMs.
	MinCheckAfter = txn.MinCheckAfter
	MaxCheckAfter = txn.MaxCheckAfter
	// DefaultTransactionMaxChecks is Options.TransactionMaxChecks when
	// zero (RocketMQ's transactionCheckMax).
	DefaultTransactionMaxChecks = 15
	// MaxTransactionMaxChecks bounds it.
	MaxTransactionMaxChecks = 1000
	// DefaultTransactionCheckInterval is Options.TransactionCheckInterval
	// when zero (RocketMQ's transactionCheckInterval).
	DefaultTransactionCheckInterval = time.Minute
	// MaxTransactionChecksPerPull is the most checks one pull hands out.
	MaxTransactionChecksPerPull = txn.MaxChecksPerPull
	// MaxTransactionCheckWait is the longest a check pull may wait.
	MaxTransactionCheckWait = txn.MaxCheckWait
)

// TransactionFinishedError is ErrTransactionFinished with how the
// transaction ended (package txn's FinishedError).
type TransactionFinishedError = txn.FinishedError

// txnSnapshotFile is the snapshot of the unresolved transactions under
// <data>/config.
const txnSnapshotFile = txn.SnapshotFile

// txnNames are the broker's and the store's rules for the names and queue
// ids a snapshot holds, and for a producer group's name.
var txnNames = txn.Names{
	Topic:      ValidateTopicName,
	Group:      func(g string) error { return registry.ValidateName("producer group", g, registry.MaxGroupLen) },
	MaxQueueID: storage.MaxQueueID,
}

// newTxns is the transaction family over b's store (Open makes it before
// the recovery, which opens it: openTxns).
func (b *Broker) newTxns() *txn.Service {
	return txn.New(txn.Config{
		Store:           b.store,
		Clock:           b.clock,
		Log:             b.log,
		MaxChecks:       b.opts.TransactionMaxChecks,
		CheckInterval:   b.opts.TransactionCheckInterval,
		Names:           txnNames,
		InvalidArgument: ErrInvalidArgument,
		StoreError:      mapStoreErr,
		AwaitDispatch:   b.awaitDispatch,
		Gate:            b.topicGate.RLocker(), // see topicdelete.go
		TopicGone:       b.txnTopicGone,
		Closing:         b.closing,
		Background:      b.closingCtx,
	})
}

// txnTopicGone reports whether topic was deleted since the CommitLog
// offset since; the caller holds topicGate.
func (b *Broker) txnTopicGone(topic string, since int64) bool {
	if _, ok := b.registry.Topic(topic); !ok {
		return true
	}
	return since < b.retryFloor(topic)
}

// CommitTransaction ends a transaction by delivering its message to its
// topic and queue. Committing a committed transaction answers as the
// first commit did; one that was rolled back is a
// *TransactionFinishedError.
func (b *Broker) CommitTransaction(ctx context.Context, id string) (Transaction, error) {
	if b.closed.Load() {
		return Transaction{}, ErrShuttingDown
	}
	return b.txns.Commit(ctx, id)
}

// RollbackTransaction ends a transaction by discarding its message;
// idempotent as CommitTransaction.
func (b *Broker) RollbackTransaction(ctx context.Context, id string) (Transaction, error) {
	if b.closed.Load() {
		return Transaction{}, ErrShuttingDown
	}
	return b.txns.Rollback(ctx, id)
}

// GetTransaction describes a transaction: pending (with its checks and
// the next one's due time) or how it ended.
func (b *Broker) GetTransaction(ctx context.Context, id string) (Transaction, error) {
	return b.txns.Describe(ctx, id)
}

// PullTransactionChecks hands out up to limit checks of group's unresolved
// transactions that are due, waiting up to wait for one to fall due. Each
// handed-out check counts (checkTimes) and schedules the next.
func (b *Broker) PullTransactionChecks(ctx context.Context, group string, limit int, wait time.Duration) ([]TransactionCheck, error) {
	if b.closed.Load() {
		return nil, ErrShuttingDown
	}
	checks, err := b.txns.PullChecks(ctx, group, limit, wait)
	var out []TransactionCheck
	for _, c := range checks {
		out = append(out, TransactionCheck{Transaction: c.View, Message: halfView(c.Half, c.View)})
	}
	return out, err
}

// halfView renders a half message as a pull would, named by its
// transaction.
func halfView(m *message.Message, t Transaction) ReceivedMessage {
	rm := toReceived(m)
	rm.MessageID, rm.Topic, rm.QueueID, rm.QueueOffset = t.ID, t.Topic, t.QueueID, -1
	return rm
}

// TransactionStatus counts the unresolved transactions and what ended
// transactions since start.
func (b *Broker) TransactionStatus() TransactionStats { return b.txns.Status() }

// checkTxnSend checks the transaction fields of one message of a send.
func (b *Broker) checkTxnSend(in *SendMessage) error {
	return b.txns.CheckSend(txn.Send{Transactional: in.Transactional, ProducerGroup: in.ProducerGroup, CheckAfterMs: in.CheckAfterMs,
		Delayed: in.DelayLevel != 0 || in.DelayMs != 0 || !in.DeliverAt.IsZero()})
}

// reserveTxn counts a transactional send of group being written against
// the quotas (package txn's Service.Reserve says when the returned func
// ends the reservation).
func (b *Broker) reserveTxn(group string) (release func(stored bool, phys int64), err error) {
	q := b.opts.Quotas
	return b.txns.Reserve(group, func(have, all int) error {
		if err := over("transactionsPerProducerGroup", "unresolved transactions of producer group "+group, "--max-transactions-per-producer-group",
			q.MaxTransactionsPerProducerGroup, have, have+1); err != nil {
			return err
		}
		return over("pendingTransactions", "unresolved transactions", "--max-pending-transactions", q.MaxPendingTransactions, all, all+1)
	})
}

// The family's entry points as the broker's other files call them: open
// and close (broker.go), the periodic snapshot (broker.go), following
// (follow.go; the caller holds b.txns' lock), the leader's roll-back loop
// (leader.go), a topic's deletion (topicdelete.go; the caller holds
// topicGate) and retention's carry (retention.go).

func (b *Broker) openTxns(ctx context.Context) error { return b.txns.Open(ctx) }

func (b *Broker) snapshotTxns() error { return b.txns.WriteSnapshot() }

func (b *Broker) closeTxns() error {
	if b.txns == nil {
		return nil
	}
	return b.txns.Close()
}

func (b *Broker) followTxns() error { return b.txns.Follow() }

func (b *Broker) txnLoop(ctx context.Context) { b.txns.Loop(ctx) }

func (b *Broker) rollbackTopicTxns(topic string) error { return b.txns.RollbackTopic(topic) }

func (b *Broker) carryTxns(cut int64) error { return b.txns.Carry(cut) }
