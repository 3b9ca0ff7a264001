package registry

import (
	"encoding/json"
	"fmt"

	"github.com/mqgate/mqgate/server/broker/receipt"
)

// Topic is the family's system topic (queue 0).
const Topic = "rmq_sys_META"

// The kinds of a Record.
const (
	KindTopic        = "topic"         // Topic is the topic's configuration
	KindTopicDeleted = "topic-deleted" // Name was deleted, with Tomb
	KindTombstone    = "tombstone"     // Name's tombstone is Tomb (nil: dropped)
	KindGroup        = "group"         // Group is the group's configuration
	KindGroupDeleted = "group-deleted" // Name was deleted
	// KindReceiptKey: Key is a receipt key (package receipt).
	KindReceiptKey = receipt.MetaKind
)

// Record is one registry change. The body of an rmq_sys_META message is a
// JSON array of them (EncodeBody, DecodeBody), applied in order.
type Record struct {
	Kind  string       `json:"kind"`
	Name  string       `json:"name,omitempty"`
	Topic *TopicConfig `json:"topic,omitempty"`
	Group *GroupConfig `json:"group,omitempty"`
	Tomb  *Tombstone   `json:"tomb,omitempty"`
	Key   *receipt.Key `json:"key,omitempty"`
}

// Check reports what makes rec unusable: an unknown kind, or a topic,
// group or key record without its topic, group or key. State.Apply
// refuses such a record (and leaves the state as it was).
func (rec Record) Check() error {
	switch rec.Kind {
	case KindTopic:
		if rec.Topic == nil {
			return fmt.Errorf("meta record %s without a topic", rec.Kind)
		}
	case KindGroup:
		if rec.Group == nil {
			return fmt.Errorf("meta record %s without a group", rec.Kind)
		}
	case KindReceiptKey:
		if rec.Key == nil {
			return fmt.Errorf("meta record %s without a key", rec.Kind)
		}
	case KindTopicDeleted, KindTombstone, KindGroupDeleted:
	default:
		return fmt.Errorf("unknown meta record kind %q", rec.Kind)
	}
	return nil
}

// EncodeBody is the body of one rmq_sys_META message holding recs.
func EncodeBody(recs ...Record) ([]byte, error) {
	return json.Marshal(recs)
}

// DecodeBody decodes the body of an rmq_sys_META message. It checks the
// JSON only: each record is checked as it is applied (Record.Check), so
// that an unusable record of a body does not keep the others from being
// applied.
func DecodeBody(body []byte) ([]Record, error) {
	var recs []Record
	if err := json.Unmarshal(body, &recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// MaxCarryBytes bounds the body of one rmq_sys_META message of a carry
// (CarryBodies); one record is always one message, however large.
const MaxCarryBytes = 1 << 20

// CarryBodies packs recs, in order, into message bodies of at most
// MaxCarryBytes each (a record larger than that alone in its own).
func CarryBodies(recs []Record) ([][]byte, error) {
	var bodies [][]byte
	var chunk []json.RawMessage
	size := 0
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		b, err := json.Marshal(chunk)
		if err != nil {
			return err
		}
		bodies = append(bodies, b)
		chunk, size = nil, 0
		return nil
	}
	for _, rec := range recs {
		b, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		if size+len(b) > MaxCarryBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		chunk = append(chunk, b)
		size += len(b) + 1
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return bodies, nil
}
