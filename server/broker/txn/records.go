package txn

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/server/broker/quote"
	"github.com/mqgate/mqgate/storage/message"
)

// The family's system topics (queue 0 of each).
const (
	// HalfTopic holds the half messages (RocketMQ's
	// RMQ_SYS_TRANS_HALF_TOPIC).
	HalfTopic = "rmq_sys_TRANS_HALF"
	// OpTopic holds the op records (RocketMQ's
	// RMQ_SYS_TRANS_OP_HALF_TOPIC).
	OpTopic = "rmq_sys_TRANS_OP"
)

// The properties of a half message beside REAL_TOPIC and REAL_QID, its
// destination (part of the on-disk format).
const (
	// PropID names the transaction a carried half-message copy or a
	// committed message belongs to.
	PropID = "TRAN_ID"
	// PropGroup is a half message's producer group.
	PropGroup = "TRAN_PGROUP"
	// PropCheckAfter is a half message's checkAfterMs.
	PropCheckAfter = "TRAN_CHECK_AFTER_MS"
	// PropChecks and PropNextCheck, on a copy carried past retention, are
	// the checks handed out so far and the next due time (unix ms).
	PropChecks    = "TRAN_CHECK_TIMES"
	PropNextCheck = "TRAN_NEXT_CHECK_MS"
)

// The states of an op record.
const (
	// Checked: a check was handed out (the new count and the next due
	// time).
	Checked = "checked"
	// Committed and RolledBack end a transaction.
	Committed  = "committed"
	RolledBack = "rolled-back"
)

// Why a transaction was rolled back (an op record's reason).
const (
	// ReasonProducer: the producer (or an operator) asked for it.
	ReasonProducer = "producer"
	// ReasonMaxChecks: every check was handed out and none answered.
	ReasonMaxChecks = "max-checks"
	// ReasonTopicDeleted: its topic was deleted before the commit.
	ReasonTopicDeleted = "topic-deleted"
	// ReasonLost: its half message was lost (a damaged CommitLog).
	ReasonLost = "lost"
)

// The delay of a transaction's first check (checkAfterMs).
const (
	// DefaultCheckAfter is the delay of a half message that gives none
	// (RocketMQ's transactionTimeOut).
	DefaultCheckAfter = 6 * time.Second
	// MinCheckAfter and MaxCheckAfter bound it.
	MinCheckAfter = 100 * time.Millisecond
	MaxCheckAfter = 24 * time.Hour
)

// Key is the UNIQ_KEY of a transaction's op records, carried copies and
// committed message.
func Key(id string) string { return "txn:" + id }

// IDOf is the transaction a half record (or a committed message) belongs
// to: its TRAN_ID, else its own message id.
func IDOf(m *message.Message) string {
	if id := m.Property(PropID); id != "" {
		return id
	}
	return message.NewID(m.StoreHost, m.PhysicalOffset).String()
}

// Half is what applying a half record reads of it (ReadHalf).
type Half struct {
	// ID is the transaction's id (IDOf).
	ID string
	// Seq and Phys are the record's queue offset and CommitLog offset.
	Seq, Phys int64
	// Topic and Queue are its destination (REAL_TOPIC, REAL_QID).
	Topic string
	Queue int32
	// Group is its producer group.
	Group string
	// CheckAfterMs is its first check's delay (0: DefaultCheckAfter).
	CheckAfterMs int64
	// BornMs is its send time (unix ms).
	BornMs int64
	// Checks and NextCheckMs are, on a carried copy, the checks handed
	// out and when the next falls due (unix ms); zero on a first record.
	Checks      int
	NextCheckMs int64
}

// ReadHalf reads a half record's fields; what does not parse reads as
// zero.
func ReadHalf(m *message.Message) Half {
	qid, _ := strconv.ParseInt(m.Property(message.PropertyRealQueueID), 10, 32)
	afterMs, err := strconv.ParseInt(m.Property(PropCheckAfter), 10, 64)
	if err != nil {
		afterMs = 0
	}
	checks, _ := strconv.Atoi(m.Property(PropChecks))
	nextMs, _ := strconv.ParseInt(m.Property(PropNextCheck), 10, 64)
	return Half{ID: IDOf(m), Seq: m.QueueOffset, Phys: m.PhysicalOffset, Topic: m.Property(message.PropertyRealTopic),
		Queue: int32(qid), Group: m.Property(PropGroup), CheckAfterMs: afterMs, BornMs: m.BornTimestamp,
		Checks: checks, NextCheckMs: nextMs}
}

// OpRecord is the body of an rmq_sys_TRANS_OP record (one transaction per
// record).
type OpRecord struct {
	ID    string    `json:"id"`
	State string    `json:"state"` // Checked, Committed, RolledBack
	At    time.Time `json:"at"`
	// CheckTimes is the checks handed out (with this one, for Checked).
	CheckTimes int `json:"checkTimes"`
	// NextCheckMs is when the next check falls due (Checked; unix ms).
	NextCheckMs int64 `json:"nextCheckMs,omitempty"`
	// Reason says why a transaction was rolled back.
	Reason string `json:"reason,omitempty"`
	// ProducerGroup, Topic, QueueID and BornMs describe a finished
	// transaction (Committed, RolledBack).
	ProducerGroup string `json:"producerGroup,omitempty"`
	Topic         string `json:"topic,omitempty"`
	QueueID       int32  `json:"queueId,omitempty"`
	BornMs        int64  `json:"bornMs,omitempty"`
}

// DecodeOp decodes and checks an op record's body.
func DecodeOp(body []byte) (OpRecord, error) {
	var rec OpRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		return rec, fmt.Errorf("transaction op record: %w", err)
	}
	if mid, err := message.ParseID(rec.ID); err != nil {
		return rec, fmt.Errorf("transaction op record: id: %w", err)
	} else if rec.ID != mid.String() {
		return rec, fmt.Errorf("transaction op record: id %s is not in its canonical form", quote.Value(rec.ID))
	}
	switch rec.State {
	case Checked, Committed, RolledBack:
	default:
		return rec, fmt.Errorf("transaction op record: state %s", quote.Value(rec.State))
	}
	if rec.CheckTimes < 0 {
		return rec, fmt.Errorf("transaction op record: checkTimes %d", rec.CheckTimes)
	}
	return rec, nil
}

// OpMessage is the rmq_sys_TRANS_OP record of rec, born at now, with
// UNIQ_KEY Key(rec.ID).
func OpMessage(rec OpRecord, now time.Time) *message.Message {
	body, err := json.Marshal(rec)
	if err != nil {
		panic(err) // plain fields always marshal
	}
	m := &message.Message{Topic: OpTopic, Body: body, BornTimestamp: now.UnixMilli()}
	m.SetProperty(message.PropertyUniqKey, Key(rec.ID))
	return m
}
