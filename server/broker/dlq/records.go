package dlq

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/storage/message"
)

// TopicPrefix names the dead-letter topics: a group's dead letters are the
// messages of TopicPrefix+group (Topic), queue 0.
const TopicPrefix = "%DLQ%"

// StatusTopic carries the status changes of dead letters (queue 0).
const StatusTopic = "rmq_sys_DLQ"

// Topic is group's dead-letter topic.
func Topic(group string) string { return TopicPrefix + group }

// GroupOf is the group whose dead-letter topic topic is (ok false when it
// is none).
func GroupOf(topic string) (group string, ok bool) { return strings.CutPrefix(topic, TopicPrefix) }

// The statuses of a dead letter. Dead is every letter's first; a
// StatusRecord moves it to Resent or Discarded.
const (
	Dead      = "dead"
	Resent    = "resent"
	Discarded = "discarded"
)

// StatusRecord is one status change of a dead letter: the body of an
// rmq_sys_DLQ record is a JSON array of them (EncodeStatuses,
// DecodeStatuses). At is chosen by the request that writes the record.
type StatusRecord struct {
	Group     string    `json:"group"`
	MessageID string    `json:"messageId"`
	Status    string    `json:"status"`
	At        time.Time `json:"at"`
}

// EncodeStatuses is the body of the rmq_sys_DLQ record of recs.
func EncodeStatuses(recs []StatusRecord) ([]byte, error) { return json.Marshal(recs) }

// DecodeStatuses decodes the body of an rmq_sys_DLQ record. It checks the
// JSON only, not the fields: a record is applied as it was written.
func DecodeStatuses(body []byte) ([]StatusRecord, error) {
	var recs []StatusRecord
	if err := json.Unmarshal(body, &recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// StatusMessage is the rmq_sys_DLQ record of recs, born at now.
func StatusMessage(recs []StatusRecord, now time.Time) (*message.Message, error) {
	body, err := EncodeStatuses(recs)
	if err != nil {
		return nil, err
	}
	return &message.Message{Topic: StatusTopic, Body: body, BornTimestamp: now.UnixMilli()}, nil
}

// The properties of a dead letter set by the broker (part of the on-disk
// format), beside those every retry copy carries (RETRY_TOPIC,
// ORIGIN_MESSAGE_ID, the attempt history).
const (
	// PropReason is the reason of the failure that made the letter dead.
	PropReason = "DLQ_REASON"
	// PropID, on a copy carried past retention, is the letter's id: its
	// first copy's message id (StableID).
	PropID = "DLQ_ID"
	// PropDeadAt, on a carried copy, is the letter's death time (unix ms):
	// the first copy's store time.
	PropDeadAt = "DLQ_DEAD_AT"
)

// Key is the UNIQ_KEY of a carried copy of the dead letter id, by which
// a lookup finds it once its first copy is gone.
func Key(id string) string { return "dlq:" + id }

// StableID is the id a dead letter is known by: the id of its first copy.
func StableID(m *message.Message) string {
	if id := m.Property(PropID); id != "" {
		return id
	}
	return message.NewID(m.StoreHost, m.PhysicalOffset).String()
}

// DeadAt is when the dead letter m died: PropDeadAt when it is a carried
// copy, else its store time (UTC).
func DeadAt(m *message.Message) time.Time {
	if ms, err := strconv.ParseInt(m.Property(PropDeadAt), 10, 64); err == nil {
		return time.UnixMilli(ms).UTC()
	}
	return time.UnixMilli(m.StoreTimestamp).UTC()
}

// MarkCarried makes c, a copy of the dead letter m on the same topic, the
// letter's carried copy: its id, its death time (m's, unless m is itself
// a carried copy and c carries it already) and its Key.
func MarkCarried(c, m *message.Message) {
	id := StableID(m)
	c.SetProperty(PropID, id)
	if c.Property(PropDeadAt) == "" {
		c.SetProperty(PropDeadAt, strconv.FormatInt(m.StoreTimestamp, 10))
	}
	c.SetProperty(message.PropertyUniqKey, Key(id))
}
