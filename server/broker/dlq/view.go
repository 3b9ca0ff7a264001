package dlq

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/storage/message"
)

// Letter is one message in a group's dead-letter queue, as the requests
// and the projection feed answer it (broker.DeadLetter is an alias).
type Letter struct {
	MessageID       string
	OriginMessageID string
	OriginalTopic   string
	ReconsumeTimes  int32
	Reason          string
	FirstFailedAt   time.Time
	DeadAt          time.Time
	Status          string
	StatusAt        time.Time
	Attempts        []retry.Attempt
	Tag             string
	Keys            []string
	Properties      map[string]string
	Body            []byte // only filled by Get
}

// View is group's dead letter m as a Letter: its id (StableID), what its
// properties say, its status in the Table, and its body when withBody.
func (s *Service) View(group string, m *message.Message, withBody bool) Letter {
	d := Letter{
		MessageID:       StableID(m),
		OriginMessageID: m.Property(message.PropertyOriginMessageID),
		OriginalTopic:   m.Property(message.PropertyRetryTopic),
		ReconsumeTimes:  m.ReconsumeTimes,
		Reason:          m.Property(PropReason),
		DeadAt:          DeadAt(m),
		Status:          Dead,
		Attempts:        retry.ParseAttempts(m.Property(s.cfg.Names.Attempts)),
		Tag:             m.Tag(),
		Keys:            m.Keys(),
	}
	if len(d.Attempts) > 0 {
		d.FirstFailedAt = d.Attempts[0].At
	} else {
		d.FirstFailedAt = d.DeadAt
	}
	if r, ok := s.table.Get(group, d.MessageID); ok {
		d.Status, d.StatusAt = r.Status, r.At
	}
	// The user's properties only (nil when there are none), as a received
	// message shows them.
	for k, v := range m.Properties {
		if s.cfg.Reserved(k) {
			continue
		}
		if d.Properties == nil {
			d.Properties = make(map[string]string)
		}
		d.Properties[k] = v
	}
	if withBody {
		d.Body = m.Body
	}
	return d
}
