package timer

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/storage/message"
)

// The two topics of the family, both written and read at queue 0.
const (
	// Topic holds the timer records: a timer's first record and the
	// copies that supersede it (a reschedule, a carry past retention).
	Topic = "rmq_sys_TIMER"
	// StatusTopic holds the status records that settle timer records.
	StatusTopic = "rmq_sys_TIMER_STATUS"
)

// The properties of a timer record set by the broker (part of the on-disk
// format), beside the storage engine's REAL_TOPIC, REAL_QID and
// TIMER_DELIVER_MS.
const (
	// PropID, on a copy, is the timer's id: its first record's message id.
	PropID = "TIMER_ID"
	// PropPrev, on a copy, is the timer-queue offset of the record it
	// supersedes.
	PropPrev = "TIMER_PREV"
)

// The statuses a status record settles a timer record with.
const (
	Delivered = "delivered"
	Cancelled = "cancelled"
)

// Key is the UNIQ_KEY of timer id's copies and of its delivery.
func Key(id string) string { return "timer:" + id }

// ID is the id of the timer whose record m is: PropID on a copy, else
// m's own message id.
func ID(m *message.Message) string {
	if id := m.Property(PropID); id != "" {
		return id
	}
	return message.NewID(m.StoreHost, m.PhysicalOffset).String()
}

// IDOffset is the CommitLog offset the timer's id names (its first
// record's).
func IDOffset(m *message.Message) int64 {
	if id, err := message.ParseID(m.Property(PropID)); err == nil {
		return id.Offset()
	}
	return m.PhysicalOffset
}

// DueMs is timer record m's due time in unix ms (0 when it has none).
func DueMs(m *message.Message) int64 {
	ms, _ := strconv.ParseInt(m.Property(message.PropertyDeliverTimeMs), 10, 64)
	return ms
}

// Due is timer record m's due time.
func Due(m *message.Message) time.Time { return time.UnixMilli(DueMs(m)) }

// FormatDue is the TIMER_DELIVER_MS value of due: unix ms, rounded up,
// so that a timer never fires before its time.
func FormatDue(due time.Time) string {
	return strconv.FormatInt((due.UnixNano()+int64(time.Millisecond)-1)/int64(time.Millisecond), 10)
}

// Wrap makes m, a message for its topic and queue, the first record of a
// timer due at due: its destination moves to REAL_TOPIC and REAL_QID.
func Wrap(m *message.Message, due time.Time) {
	m.SetProperty(message.PropertyRealTopic, m.Topic)
	m.SetProperty(message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.SetProperty(message.PropertyDeliverTimeMs, FormatDue(due))
	m.Topic, m.QueueID = Topic, 0
}

// MarkCopy makes c, a copy of timer record m on Topic, the record that
// supersedes m, due at at: it names the timer (PropID, and Key as its
// UNIQ_KEY, by which the newest copy is found) and m's queue offset
// (PropPrev).
func MarkCopy(c, m *message.Message, at time.Time) {
	id := ID(m)
	c.SetProperty(PropID, id)
	c.SetProperty(PropPrev, strconv.FormatInt(m.QueueOffset, 10))
	c.SetProperty(message.PropertyUniqKey, Key(id))
	c.SetProperty(message.PropertyDeliverTimeMs, FormatDue(at))
}

// Prev is the queue offset of the record copy m supersedes (ok false
// when m names none: a first record, or a copy written before the
// index).
func Prev(m *message.Message) (seq int64, ok bool) {
	p := m.Property(PropPrev)
	if p == "" {
		return 0, false
	}
	seq, err := strconv.ParseInt(p, 10, 64)
	return seq, err == nil
}

// DeliveryDrops are the properties of a timer record its delivered
// message does not keep; the delivery's UNIQ_KEY is the timer's Key.
var DeliveryDrops = []string{message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyDeliverTimeMs,
	PropID, PropPrev, message.PropertyUniqKey}

// StatusRecord is one entry of a status record's JSON array: timer
// record Seq (of timer ID, destined to Topic) is settled with Status at
// At, which the request or delivery that writes the record chooses.
type StatusRecord struct {
	ID     string    `json:"id"`
	Status string    `json:"status"`
	At     time.Time `json:"at"`
	// Seq is the timer-queue offset of the record settled and Topic its
	// destination (absent from records written before the timer index:
	// those settle every record of ID).
	Seq   *int64 `json:"seq,omitempty"`
	Topic string `json:"topic,omitempty"`
}

// Settle is the entry that settles timer record m with status at at.
func Settle(m *message.Message, status string, at time.Time) StatusRecord {
	seq := m.QueueOffset
	return StatusRecord{ID: ID(m), Status: status, At: at.UTC(), Seq: &seq, Topic: m.Property(message.PropertyRealTopic)}
}

// EncodeStatuses is the body of the status record of recs.
func EncodeStatuses(recs []StatusRecord) ([]byte, error) { return json.Marshal(recs) }

// DecodeStatuses decodes the body of a status record. It checks the JSON
// only, not the fields: a record is applied as it was written (an entry
// with a Seq kills that record, whatever its Status).
func DecodeStatuses(body []byte) ([]StatusRecord, error) {
	var recs []StatusRecord
	if err := json.Unmarshal(body, &recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// StatusMessage is the status record of recs, born at now.
func StatusMessage(recs []StatusRecord, now time.Time) (*message.Message, error) {
	body, err := EncodeStatuses(recs)
	if err != nil {
		return nil, err
	}
	return &message.Message{Topic: StatusTopic, Body: body, BornTimestamp: now.UnixMilli()}, nil
}
