package dlq

import (
	"context"
	"errors"
)

// The projection feed (the PostgreSQL mirror's): read-only access to the
// dead-letter queues and to rmq_sys_DLQ by queue offset. Each is a queue
// with dense offsets, so a projection keeps one cursor per stream, stores
// it with what it derived, and resumes from it after a crash of either
// side (server/broker's events.go).

// Arrivals reads group's dead letters by queue offset [from, from+max),
// without bodies; next is the offset after the last one read.
func (s *Service) Arrivals(ctx context.Context, group string, from int64, max int) ([]Letter, int64, error) {
	if err := s.cfg.Store.AwaitDispatch(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return nil, from, s.cfg.StoreError(err)
	}
	res, err := s.cfg.Store.ReadQueue(Topic(group), 0, from, max, nil)
	if err != nil {
		return nil, from, s.cfg.StoreError(err)
	}
	out := make([]Letter, len(res.Messages))
	for i, m := range res.Messages {
		out[i] = s.View(group, m, false)
	}
	return out, res.Next, nil
}

// StatusChanges reads the status changes of rmq_sys_DLQ by queue offset
// [from, from+max), in order (a record that does not decode is skipped);
// next is the offset after the last record read.
func (s *Service) StatusChanges(ctx context.Context, from int64, max int) ([]StatusRecord, int64, error) {
	if err := s.cfg.Store.AwaitDispatch(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return nil, from, s.cfg.StoreError(err)
	}
	res, err := s.cfg.Store.ReadQueue(StatusTopic, 0, from, max, nil)
	if err != nil {
		return nil, from, s.cfg.StoreError(err)
	}
	var out []StatusRecord
	for _, m := range res.Messages {
		recs, err := DecodeStatuses(m.Body)
		if err != nil {
			continue
		}
		out = append(out, recs...)
	}
	return out, res.Next, nil
}
