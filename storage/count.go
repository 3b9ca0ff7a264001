package storage

import (
	"errors"

	"github.com/mqgate/mqgate/storage/consumequeue"
)

// CountQueue counts the entries of (topic, queueID) in [from, to) whose
// tagsCode match accepts (nil accepts all), reading the ConsumeQueue only
// (20 bytes an entry, no CommitLog reads). The range is clipped to the
// queue's [MinOffset, MaxOffset). It examines at most limit entries;
// complete is false when it stopped there (n then counts the examined
// part: a lower bound).
func (s *Store) CountQueue(topic string, queueID int32, from, to int64, match func(tagsCode int64) bool, limit int64) (n int64, complete bool, err error) {
	if s.closed.Load() {
		return 0, false, ErrClosed
	}
	q, _ := s.queue(topic, queueID, false)
	if q == nil {
		return 0, true, nil
	}
	from, to = max(from, q.MinOffset()), min(to, q.MaxOffset())
	var entries [256]consumequeue.Entry
	for examined := int64(0); from < to; {
		if examined >= limit {
			return n, false, nil
		}
		want := min(int64(len(entries)), to-from, limit-examined)
		got, err := q.Read(from, entries[:want])
		if errors.Is(err, consumequeue.ErrOffsetTooSmall) {
			from = q.MinOffset() // retention moved the minimum meanwhile
			continue
		}
		if err != nil && got == 0 {
			return n, false, err
		}
		for _, e := range entries[:got] {
			if match == nil || match(e.TagsCode) {
				n++
			}
		}
		from += int64(got)
		examined += int64(got)
		if err != nil {
			return n, false, err
		}
	}
	return n, true, nil
}
