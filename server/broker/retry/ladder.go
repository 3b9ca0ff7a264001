package retry

import (
	"errors"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/schedule"
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

// Dest is where a schedule entry goes.
type Dest struct {
	Topic  string // REAL_TOPIC
	Origin string // RETRY_TOPIC of a retry ("" for a producer's delayed message)
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

// Ladder counts what waits in the delay ladder (see above). Its lock is
// held by a count across its reads of the store and by Reset; nothing
// else is taken under it but the store's locks and Dropped's (the
// broker's registry lock).
type Ladder struct {
	mu     sync.Mutex
	levels []ladderLevel
	ids    map[Dest]int32
	dests  []Dest // by id; dests[0] is droppedDest
}

// LevelCount is one level's count; Known is false when it cannot be told.
type LevelCount struct {
	Level int
	Count int64
	Known bool
}

// LadderSource is what the Ladder reads: the scheduler's positions, the
// store's schedule queues, the log, and which entries go to a topic
// deleted since they were scheduled (Service.ScheduledForDeleted).
type LadderSource struct {
	Status  func() []schedule.LevelStatus
	Store   Store
	Log     zerolog.Logger
	Dropped func(d Dest, level int, offset int64) bool
	// RetryPrefix is the retry topics' prefix (a retry's Dest names its
	// origin).
	RetryPrefix string
}

// DestOf is the Dest of schedule entry m going to topic: a retry's (topic
// a retry topic) names its original topic (RETRY_TOPIC) as its origin.
func DestOf(m *message.Message, topic, retryPrefix string) Dest {
	d := Dest{Topic: topic}
	if strings.HasPrefix(topic, retryPrefix) {
		d.Origin = m.Property(message.PropertyRetryTopic)
	}
	return d
}

// Init sizes the ladder for levels delay levels.
func (l *Ladder) Init(levels int) {
	l.levels = make([]ladderLevel, levels)
	l.ids = make(map[Dest]int32)
	l.dests = []Dest{{}}
}

// Reset forgets every level: the next refresh reads the undelivered
// entries again (after a topic deletion changed what will be delivered).
func (l *Ladder) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.levels {
		l.levels[i] = ladderLevel{}
	}
}

func (l *Ladder) id(d Dest) int32 {
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

// Counts refreshes the ladder from the scheduler's positions and
// returns, per level, the undelivered entries whose destination want
// accepts.
func (l *Ladder) Counts(src LadderSource, want func(Dest) bool) []LevelCount {
	l.mu.Lock()
	defer l.mu.Unlock()
	budget := ladderBudget
	out := make([]LevelCount, len(l.levels))
	for i, st := range src.Status() {
		if i >= len(l.levels) {
			break
		}
		lv := &l.levels[i]
		if lv.counts == nil {
			*lv = ladderLevel{head: st.Offset, next: st.Offset, counts: make(map[int32]int64)}
		}
		lv.popTo(st.Offset)
		budget = l.read(src, i+1, lv, st.MaxOffset, budget)
		out[i] = LevelCount{Level: i + 1, Known: lv.next >= st.MaxOffset}
		for id, n := range lv.counts {
			if n > 0 && want(l.dests[id]) {
				out[i].Count += n
			}
		}
	}
	return out
}

// read reads level's entries from lv.next towards top within budget and
// returns what is left of it. The caller holds the ladder lock.
func (l *Ladder) read(src LadderSource, level int, lv *ladderLevel, top int64, budget int) int {
	queue := int32(level - 1)
	for lv.next < top && budget > 0 && len(lv.runs)-lv.first < maxLadderRuns {
		from := lv.next
		res, err := src.Store.ReadQueue(message.ScheduleTopic, queue, from, min(256, budget), nil)
		if errors.Is(err, storage.ErrOffsetTooSmall) {
			// Retention removed entries never read: count from the minimum.
			low := src.Store.MinOffset(message.ScheduleTopic, queue)
			*lv = ladderLevel{head: low, next: low, counts: make(map[int32]int64)}
			continue
		}
		if err != nil || res.Next <= from {
			src.Log.Warn().Err(err).Int("level", level).Int64("offset", from).Msg("counting the delay ladder stopped")
			return budget
		}
		for _, m := range res.Messages {
			if gap := m.QueueOffset - lv.next; gap > 0 {
				lv.push(droppedDest, int32(gap)) // records retention removed
			}
			dest := droppedDest
			d := DestOf(m, m.Property(message.PropertyRealTopic), src.RetryPrefix)
			if !src.Dropped(d, level, m.QueueOffset) {
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
