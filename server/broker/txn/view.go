package txn

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/storage/message"
)

// What the requests answer (server/broker's Transaction,
// TransactionStats and TransactionFinishedError are these), and the
// messages the family writes beside its op records: the half message a
// transactional send stores, its copy carried past retention, the message
// a commit delivers.

// Sentinels of the requests (server/broker's ErrTransactionNotFound and
// ErrTransactionFinished are these). Their text is shown to the caller, so
// it speaks of the request, never of this package.
var (
	// ErrNotFound: no transaction has that id (never sent, or finished so
	// long ago that retention took its records).
	ErrNotFound = errors.New("transaction not found")
	// ErrFinished: the transaction ended the other way; it always comes as
	// a *FinishedError.
	ErrFinished = errors.New("transaction already finished")
)

// Pending is the State of a View of an unresolved transaction (an op
// record's Committed and RolledBack end one).
const Pending = "pending"

// View is one transactional (half) message and how it stands.
type View struct {
	// ID is the transaction id: the send's message id.
	ID string
	// State is Pending, Committed or RolledBack.
	State string
	// Reason says why a rolled-back transaction ended (Reason…).
	Reason string
	// ProducerGroup is the group asked about it.
	ProducerGroup string
	// Topic and QueueID are where the message goes when committed.
	Topic   string
	QueueID int32
	// QueueOffset is the committed message's queue offset (-1 when not
	// committed or not known).
	QueueOffset int64
	// CheckTimes counts the checks handed out.
	CheckTimes int
	// NextCheckAt is when the next check falls due (pending only).
	NextCheckAt time.Time
	// CreatedAt is when the half message was stored; FinishedAt when the
	// transaction ended (zero while pending).
	CreatedAt, FinishedAt time.Time
}

// viewOf describes pending transaction t; the caller holds the state's
// lock or t's op lock.
func viewOf(t *Txn) View {
	return View{ID: t.ID(), State: Pending, ProducerGroup: t.Group(), Topic: t.Topic(), QueueID: t.Queue(), QueueOffset: -1,
		CheckTimes: t.Checks(), NextCheckAt: t.Next().UTC(), CreatedAt: t.Born().UTC()}
}

// Check is one check handed out to a producer group: the transaction and
// its half message (the broker renders it as a pull does).
type Check struct {
	View View
	Half *message.Message
}

// Stats counts transactions.
type Stats struct {
	// Pending counts the unresolved transactions.
	Pending int
	// Committed, RolledBack and MaxChecksRolledBack count, since start,
	// the commits, all rollbacks, and the rollbacks of transactions whose
	// checks all went unanswered; ChecksHandedOut the checks given out.
	Committed, RolledBack, MaxChecksRolledBack, ChecksHandedOut uint64
}

// FinishedError is ErrFinished with how the transaction ended.
type FinishedError struct {
	Transaction View
}

// Error says how the transaction ended.
func (e *FinishedError) Error() string {
	t := e.Transaction
	how := t.State
	if t.Reason != "" {
		how += " (" + t.Reason + ")"
	}
	return fmt.Sprintf("%v: transaction %s was %s", ErrFinished, t.ID, how)
}

// Unwrap makes errors.Is(err, ErrFinished) hold.
func (e *FinishedError) Unwrap() error { return ErrFinished }

// AsHalf wraps a message of a transactional send of group for the half
// topic (checkAfterMs 0: DefaultCheckAfter).
func AsHalf(m *message.Message, group string, checkAfterMs int64) {
	if checkAfterMs == 0 {
		checkAfterMs = DefaultCheckAfter.Milliseconds()
	}
	m.SetProperty(message.PropertyRealTopic, m.Topic)
	m.SetProperty(message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.SetProperty(PropGroup, group)
	m.SetProperty(PropCheckAfter, strconv.FormatInt(checkAfterMs, 10))
	m.Topic, m.QueueID = HalfTopic, 0
}

// CommittedCopy is the message a commit of t delivers: the half message
// on its topic and queue, named by the transaction id.
func CommittedCopy(half *message.Message, t *Txn) *message.Message {
	out := half.CopyTo(t.Topic(), message.PropertyRealTopic, message.PropertyRealQueueID, PropGroup,
		PropCheckAfter, PropChecks, PropNextCheck)
	out.QueueID = t.Queue()
	out.SetProperty(PropID, t.ID())
	out.SetProperty(message.PropertyUniqKey, Key(t.ID()))
	return out
}

// HalfCopy is a copy of half record m carrying t past retention.
func HalfCopy(m *message.Message, t *Txn) *message.Message {
	c := m.CopyTo(HalfTopic)
	c.SetProperty(PropID, t.ID())
	c.SetProperty(message.PropertyUniqKey, Key(t.ID()))
	c.SetProperty(PropChecks, strconv.Itoa(t.Checks()))
	c.SetProperty(PropNextCheck, strconv.FormatInt(t.Next().UnixMilli(), 10))
	return c
}
