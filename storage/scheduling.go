package storage

import (
	"errors"

	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/schedule"
)

// ScheduleSource adapts the store to the scheduler's Source: level L is
// queue L-1 of message.ScheduleTopic.
func (s *Store) ScheduleSource() schedule.Source { return scheduleAdapter{s} }

// ScheduleSink adapts the store to the scheduler's Sink: due messages are
// stored with one batch append.
func (s *Store) ScheduleSink() schedule.Sink { return scheduleAdapter{s} }

type scheduleAdapter struct{ s *Store }

func (a scheduleAdapter) ReadLevel(level int, offset int64, max int) ([]*message.Message, int64, error) {
	res, err := a.s.ReadQueue(message.ScheduleTopic, int32(level-1), offset, max, nil)
	return res.Messages, res.Next, err
}

func (a scheduleAdapter) LevelRange(level int) (int64, int64) {
	return a.s.MinOffset(message.ScheduleTopic, int32(level-1)), a.s.MaxOffset(message.ScheduleTopic, int32(level-1))
}

func (a scheduleAdapter) Signal() <-chan struct{} { return a.s.NewDataSignal(message.ScheduleTopic) }

// Deliver stores due messages as system records: they were accepted
// already, so the send ceiling does not hold them back.
func (a scheduleAdapter) Deliver(msgs []*message.Message) error {
	return a.s.PutClass(ClassSystem, msgs, make([]PutResult, len(msgs)))
}

func (a scheduleAdapter) Delivered(topic, uniqKey string) (bool, error) {
	m, err := a.s.findByIndexedKey(topic, indexKindUniq, message.PropertyUniqKey, uniqKey, 0)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return m != nil, err
}
