package clustercheck

import (
	"slices"
	"sync"
	"time"
)

// Type is an event's place in an operation: its invoke or how it ended.
type Type string

// The event types (doc.go, "The history").
const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// Kind is what an operation does.
type Kind string

// The operation kinds.
const (
	Send Kind = "send"
	Pull Kind = "pull"
	Ack  Kind = "ack"
	Nack Kind = "nack"
)

// Message is one message of an operation: a body sent, a message pulled,
// a receipt acked or nacked. Which fields are set depends on the event:
// a send's invoke has the bodies, its ok completion adds the message id
// and position of each; a pull's ok completion has every field the
// gateway returned; an ack's or nack's invoke has the body and receipt,
// its ok completion each receipt's status.
type Message struct {
	Body           string    `json:"body"`
	ShardingKey    string    `json:"shardingKey,omitempty"` // a send's: its messages keep their order
	MessageID      string    `json:"messageId,omitempty"`
	OriginID       string    `json:"originMessageId,omitempty"` // a retry copy's first copy
	Topic          string    `json:"topic,omitempty"`
	QueueID        int32     `json:"queueId"`
	QueueOffset    int64     `json:"queueOffset"`
	ReconsumeTimes int32     `json:"reconsumeTimes,omitempty"`
	Receipt        string    `json:"receipt,omitempty"`
	LeaseUntil     time.Time `json:"leaseUntil,omitzero"`
	// Status is an ack's or nack's outcome for this receipt (ok, expired,
	// invalid), set on an ok completion only.
	Status string `json:"status,omitempty"`
}

// Event is one line of a History.
type Event struct {
	ID      int64  `json:"id"`      // the operation: its invoke and completion share it
	Process int    `json:"process"` // the client that ran it
	Type    Type   `json:"type"`
	Kind    Kind   `json:"kind"`
	Node    string `json:"node"`            // the endpoint's base URL
	Group   string `json:"group,omitempty"` // pull, ack, nack
	Topic   string `json:"topic,omitempty"`
	// Key is a send's Idempotency-Key (the same on every attempt).
	Key      string    `json:"key,omitempty"`
	Messages []Message `json:"messages,omitempty"`
	Start    time.Time `json:"start"`        // when the operation was invoked
	End      time.Time `json:"end,omitzero"` // completions only
	Error    string    `json:"error,omitempty"`
	Status   int       `json:"status,omitempty"` // the HTTP status, if one came
}

// Fault is something the test did to the system: a kill, a restart, a
// partition.
type Fault struct {
	Name string    `json:"name"`
	Time time.Time `json:"time"`
}

// History records the events of a run. It is safe for concurrent use.
type History struct {
	mu     sync.Mutex
	nextID int64
	events []Event
	faults []Fault
}

// NewHistory returns an empty History.
func NewHistory() *History { return &History{} }

// Op is an operation invoked and not yet completed.
type Op struct {
	h      *History
	invoke Event
}

// Invoke records the start of an operation now and returns it; the
// caller completes it exactly once. ev's ID, Type and Start are set here.
func (h *History) Invoke(ev Event) *Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	ev.ID, ev.Type, ev.Start = h.nextID, Invoke, time.Now()
	ev.Messages = slices.Clone(ev.Messages)
	h.events = append(h.events, ev)
	return &Op{h: h, invoke: ev}
}

// Complete records how the operation ended: typ with msgs (nil: the
// invoke's messages), the HTTP status (0 if none came) and err (nil for
// ok). It returns the completion.
func (o *Op) Complete(typ Type, msgs []Message, status int, err error) Event {
	ev := o.invoke
	ev.Type, ev.End, ev.Status = typ, time.Now(), status
	if msgs != nil {
		ev.Messages = slices.Clone(msgs)
	}
	if err != nil {
		ev.Error = err.Error()
	}
	o.h.mu.Lock()
	defer o.h.mu.Unlock()
	o.h.events = append(o.h.events, ev)
	return ev
}

// Fault records a fault at t.
func (h *History) Fault(name string, t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, Fault{Name: name, Time: t})
}

// Append adds events as they are (hand-made histories, histories read
// back from a file); IDs it hands out later stay above theirs.
func (h *History) Append(evs ...Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		h.nextID = max(h.nextID, ev.ID)
		h.events = append(h.events, ev)
	}
}

// Events returns a copy of the events, in the order they were recorded.
func (h *History) Events() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

// Faults returns a copy of the faults, in the order they were recorded.
func (h *History) Faults() []Fault {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.faults)
}
