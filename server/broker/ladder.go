package broker

import (
	"errors"
	"strings"
	"sync"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

// What waits in the delay ladder, for consumer progress. The entries of
// SCHEDULE_TOPIC_XXXX queue level-1 from the scheduler's offset on are not
// delivered yet; each names its destination (REAL_TOPIC: a topic for a
// producer's delayed message, %RETRY%<group> for a retry, whose
// RETRY_TOPIC is the original topic). Because a level is delivered in
// offset order, the ladder keeps, per level, the destinations of the
// undelivered entries it has read as runs in offset order plus a count per
// destination: the scheduler's offset moving on pops runs off the front,
// new entries are read from where the ladder stopped. Each entry is read
// once per process (the first count after a start reads the whole
// undelivered range), a count needs no scan, and memory is one run per
// change of destination, capped by maxLadderRuns per level; beyond it
// (or while a pass has not caught up, see ladderBudget) the level's count
// is unknown, never a wrong number.

const (
	// maxLadderRuns caps the runs one level tracks (8 bytes each).
	maxLadderRuns = 1 << 20
	// ladderBudget is how many schedule entries one refresh reads at most.
	ladderBudget = 1 << 18
	// droppedDest marks entries that will never be delivered (their topic
	// was deleted) or whose record retention removed: not counted.
	droppedDest int32 = 0
)

// ladderDest is where a schedule entry goes.
type ladderDest struct {
	topic  string // REAL_TOPIC
	origin string // RETRY_TOPIC of a retry ("" for a producer's delayed message)
}

type ladderRun struct {
	dest int32
	n    int32
}

type ladderLevel struct {
	head, next int64       // runs describe the entries [head, next)
	runs       []ladderRun // oldest first; runs[first:] are live
	first      int
	counts     map[int32]int64
}

type ladder struct {
	mu     sync.Mutex
	levels []ladderLevel
	ids    map[ladderDest]int32
	dests  []ladderDest // by id; dests[0] is droppedDest
}

// levelCount is one level's count; known is false when it cannot be told.
type levelCount struct {
	level int
	count int64
	known bool
}

func (l *ladder) init(levels int) {
	l.levels = make([]ladderLevel, levels)
	l.ids = make(map[ladderDest]int32)
	l.dests = []ladderDest{{}}
}

// reset forgets every level: the next refresh reads the undelivered
// entries again (after a topic deletion changed what will be delivered).
func (l *ladder) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.levels {
		l.levels[i] = ladderLevel{}
	}
}

func (l *ladder) id(d ladderDest) int32 {
	if id, ok := l.ids[d]; ok {
		return id
	}
	id := int32(len(l.dests))
	l.ids[d] = id
	l.dests = append(l.dests, d)
	return id
}

// push appends n entries of dest at the end of lv.
func (lv *ladderLevel) push(dest int32, n int32) {
	if k := len(lv.runs); k > lv.first && lv.runs[k-1].dest == dest && lv.runs[k-1].n <= 1<<30 {
		lv.runs[k-1].n += n
	} else {
		lv.runs = append(lv.runs, ladderRun{dest: dest, n: n})
	}
	if dest != droppedDest {
		lv.counts[dest] += int64(n)
	}
	lv.next += int64(n)
}

// popTo drops the entries below delivered from the front of lv.
func (lv *ladderLevel) popTo(delivered int64) {
	for lv.head < delivered && lv.first < len(lv.runs) {
		r := &lv.runs[lv.first]
		k := int32(min(int64(r.n), delivered-lv.head))
		r.n -= k
		lv.head += int64(k)
		if r.dest != droppedDest {
			lv.counts[r.dest] -= int64(k)
		}
		if r.n == 0 {
			lv.first++
		}
	}
	if lv.first > 1024 && lv.first > len(lv.runs)/2 {
		lv.runs = append(lv.runs[:0], lv.runs[lv.first:]...)
		lv.first = 0
	}
	if lv.head < delivered { // the scheduler is past everything read
		lv.head, lv.next = delivered, delivered
	}
}

// ladderCounts refreshes the ladder from the scheduler's positions and
// returns, per level, the undelivered entries whose destination want
// accepts.
func (b *Broker) ladderCounts(want func(ladderDest) bool) []levelCount {
	l := &b.ladder
	l.mu.Lock()
	defer l.mu.Unlock()
	budget := ladderBudget
	out := make([]levelCount, len(l.levels))
	for i, st := range b.scheduler.Status() {
		if i >= len(l.levels) {
			break
		}
		lv := &l.levels[i]
		if lv.counts == nil {
			*lv = ladderLevel{head: st.Offset, next: st.Offset, counts: make(map[int32]int64)}
		}
		lv.popTo(st.Offset)
		budget = b.readLadder(i+1, lv, st.MaxOffset, budget)
		out[i] = levelCount{level: i + 1, known: lv.next >= st.MaxOffset}
		for id, n := range lv.counts {
			if n > 0 && want(l.dests[id]) {
				out[i].count += n
			}
		}
	}
	return out
}

// readLadder reads level's entries from lv.next towards top within
// budget and returns what is left of it. The caller holds the ladder lock.
func (b *Broker) readLadder(level int, lv *ladderLevel, top int64, budget int) int {
	l := &b.ladder
	queue := int32(level - 1)
	for lv.next < top && budget > 0 && len(lv.runs)-lv.first < maxLadderRuns {
		from := lv.next
		res, err := b.store.ReadQueue(message.ScheduleTopic, queue, from, min(256, budget), nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			// Retention removed entries never read: count from the minimum.
			low := b.store.MinOffset(message.ScheduleTopic, queue)
			*lv = ladderLevel{head: low, next: low, counts: make(map[int32]int64)}
			continue
		}
		if err != nil || res.Next <= from {
			b.log.Warn().Err(err).Int("level", level).Int64("offset", from).Msg("counting the delay ladder stopped")
			return budget
		}
		for _, m := range res.Messages {
			if gap := m.QueueOffset - lv.next; gap > 0 {
				lv.push(droppedDest, int32(gap)) // records retention removed
			}
			dest := droppedDest
			d := ladderDest{topic: m.Property(message.PropertyRealTopic)}
			if strings.HasPrefix(d.topic, retryPrefix) {
				d.origin = m.Property(message.PropertyRetryTopic)
			}
			if !b.scheduledForDeleted(d, level, m.QueueOffset) {
				dest = l.id(d)
			}
			lv.push(dest, 1)
		}
		if gap := res.Next - lv.next; gap > 0 {
			lv.push(droppedDest, int32(gap))
		}
		budget -= int(res.Next - from)
	}
	return budget
}
