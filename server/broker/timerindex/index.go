package timerindex

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// Options configures an Index. Zero values take the defaults.
type Options struct {
	// Dir holds the index files. Required; created if missing.
	Dir string
	// BufferEntries is how many births the in-memory buffer holds before
	// Full signals that a checkpoint should write it out as a run
	// (default 65 536: 2 MiB of memory, 1.75 MiB of run file).
	BufferEntries int
	// FanIn is how many runs of one tier Compact merges into one run of
	// the next tier (default 8).
	FanIn int
	// Logger receives the index's logs (default zerolog.Nop()).
	Logger zerolog.Logger
}

// Defaults of Options.
const (
	DefaultBufferEntries = 1 << 16
	DefaultFanIn         = 8
)

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, fmt.Errorf("%w: Dir is required", ErrInvalidOptions)
	}
	if o.BufferEntries == 0 {
		o.BufferEntries = DefaultBufferEntries
	}
	if o.FanIn == 0 {
		o.FanIn = DefaultFanIn
	}
	if o.BufferEntries < 1 || o.FanIn < 2 {
		return o, fmt.Errorf("%w: BufferEntries %d (at least 1), FanIn %d (at least 2)", ErrInvalidOptions, o.BufferEntries, o.FanIn)
	}
	return o, nil
}

// Entry is a pending timer record as the index knows it.
type Entry struct {
	Due   int64  // unix ms
	ID    int64  // the timer's id: the CommitLog offset of its first record
	Seq   int64  // offset of the record in the timer queue
	Topic string // destination topic
}

// Key is the entry's position in due order.
func (e Entry) Key() Key { return Key{e.Due, e.ID, e.Seq} }

// Kill ends a timer record: Seq is no longer pending. Topic is its
// destination, for the per-topic counts ("" when the user cannot tell: the
// counts are then recomputed at the next Checkpoint).
type Kill struct {
	Seq   int64
	Topic string
}

// Update is what the user read from its queues since the index's
// position, applied at once: births first, then kills, then the floor.
type Update struct {
	// Births are new timer records, in ascending seq order. A birth
	// below the index's position was applied before and is ignored.
	Births []Entry
	// Kills end records (idempotent; a seq not pending is ignored).
	Kills []Kill
	// Pos is the position after this update.
	Pos Position
	// Floor is the timer queue's minimum: seqs below it were deleted by
	// retention and are dead (0: unchanged).
	Floor int64
}

// MinKey is before every key: Scan(MinKey, ...) starts at the soonest.
var MinKey = Key{Due: math.MinInt64, ID: math.MinInt64, Seq: math.MinInt64}

// Index is the timer index (see doc.go). Safe for concurrent use;
// Checkpoint and Compact must not run concurrently with each other.
type Index struct {
	opts Options
	log  zerolog.Logger
	full chan struct{} // buffered(1): the buffer reached BufferEntries

	mu       sync.Mutex
	closed   bool
	pos      Position
	live     *liveSet
	mem      memtable
	runs     []*run // oldest first
	obsolete []*run // out of runs; closed and deleted after the next durable checkpoint
	topics   []string
	ordinal  map[string]uint32
	counts   []int64 // pending per topic ordinal
	recount  bool    // counts are stale
	nextRun  uint64
	version  uint64 // bumped by every change a checkpoint records
	saved    uint64 // the version the last durable checkpoint holds
}

func newIndex(opts Options) *Index {
	return &Index{opts: opts, log: opts.Logger.With().Str("component", "timerindex").Logger(),
		full: make(chan struct{}, 1), ordinal: map[string]uint32{}}
}

// Open opens the index in opts.Dir: ErrNotFound when there is none,
// ErrCorrupt when its checkpoint or a run fails verification (see doc.go).
// The user then checks Position against its queues.
func Open(opts Options) (*Index, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := readState(opts.Dir)
	if err != nil {
		return nil, err
	}
	x := newIndex(opts)
	x.pos, x.live, x.recount, x.nextRun = st.pos, st.live, st.recount, st.nextRun
	x.topics, x.counts = st.topics, st.counts
	for i, t := range st.topics {
		if _, dup := x.ordinal[t]; dup {
			return nil, fmt.Errorf("%w: topic %q twice in the checkpoint", ErrCorrupt, t)
		}
		x.ordinal[t] = uint32(i)
	}
	listed := map[uint64]bool{}
	for _, m := range st.runs {
		r, err := openRun(opts.Dir, m.id, m.n, m.crc)
		if err != nil {
			x.closeRuns()
			return nil, err
		}
		r.tier, r.head = m.tier, m.head
		x.runs = append(x.runs, r)
		listed[m.id] = true
	}
	if err := removeStray(opts.Dir, listed); err != nil {
		x.closeRuns()
		return nil, err
	}
	x.version, x.saved = 1, 1
	return x, nil
}

// Create starts an empty index in opts.Dir at pos, deleting the files of
// any index there. pos.Timers is also the floor (the timer queue's
// minimum, where a rebuild starts). Nothing is written until Checkpoint.
func Create(opts Options, pos Position) (*Index, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(opts.Dir, checkpointName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := removeStray(opts.Dir, nil); err != nil {
		return nil, err
	}
	x := newIndex(opts)
	x.pos, x.live = pos, newLiveSet(pos.Timers)
	x.version = 1
	return x, nil
}

// removeStray deletes unfinished writes and run files not listed.
func removeStray(dir string, listed map[uint64]bool) error {
	names, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, d := range names {
		name := d.Name()
		id, isRun := parseRunName(name)
		if strings.HasSuffix(name, tmpSuffix) || (isRun && !listed[id]) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Position is how far the index has applied its queues.
func (x *Index) Position() Position {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.pos
}

// Full is signalled when the buffer reaches BufferEntries.
func (x *Index) Full() <-chan struct{} { return x.full }

func (x *Index) ordinalFor(topic string) uint32 {
	if o, ok := x.ordinal[topic]; ok {
		return o
	}
	o := uint32(len(x.topics))
	x.topics = append(x.topics, topic)
	x.counts = append(x.counts, 0)
	x.ordinal[topic] = o
	return o
}

// Apply applies u (see Update) and returns how many pending records the
// floor removed (records lost to retention; normally 0).
func (x *Index) Apply(u Update) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, b := range u.Births {
		if b.Seq < x.pos.Timers || !x.live.add(b.Seq) {
			continue
		}
		if len(b.Topic) == 0 || len(b.Topic) > maxTopicName {
			b.Topic = "?"
		}
		o := x.ordinalFor(b.Topic)
		x.mem.insert(item{due: b.Due, id: b.ID, seq: b.Seq, topic: o})
		x.counts[o]++
		u.Pos.Timers = max(u.Pos.Timers, b.Seq+1)
	}
	for _, k := range u.Kills {
		if !x.live.remove(k.Seq) {
			continue
		}
		if o, ok := x.ordinal[k.Topic]; ok && x.counts[o] > 0 {
			x.counts[o]--
		} else {
			x.recount = true
		}
	}
	var lost int64
	if u.Floor > x.live.floor {
		if lost = x.live.raiseFloor(u.Floor); lost > 0 {
			x.recount = true
		}
	}
	x.pos = u.Pos
	x.version++
	if x.mem.len() >= x.opts.BufferEntries {
		select {
		case x.full <- struct{}{}:
		default:
		}
	}
	return lost
}

// Live reports whether seq is pending.
func (x *Index) Live(seq int64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.live.contains(seq)
}

// NextLive is the smallest pending seq >= from.
func (x *Index) NextLive(from int64) (int64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.live.next(from)
}

// Count is the number of pending records.
func (x *Index) Count() int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.live.total
}

// CountTopic is the number of pending records destined to topic.
func (x *Index) CountTopic(topic string) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if o, ok := x.ordinal[topic]; ok {
		return x.counts[o]
	}
	return 0
}

// Scan calls fn with the pending entries after the key after, in key
// order — of topic, or of all when topic is "" — until fn returns
// false or limit entries (pending or not: limit bounds the work; 0 is no
// limit) were examined. It returns the key of the last entry examined
// (pass it as after to resume) and whether it reached the end. fn runs
// under the index's lock: it must not call the index.
func (x *Index) Scan(after Key, topic string, limit int, fn func(Entry) bool) (Key, bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return after, true, ErrClosed
	}
	want, filtered := uint32(0), topic != ""
	if filtered {
		o, ok := x.ordinal[topic]
		if !ok || x.counts[o] == 0 && !x.recount {
			return after, true, nil
		}
		want = o
	}
	fromStart := after == MinKey
	if fromStart {
		if err := x.trimHeadsLocked(); err != nil {
			return after, false, err
		}
	}
	m, iters, err := x.mergerLocked(after, fromStart)
	if err != nil {
		return after, false, err
	}
	last, examined := after, 0
	for {
		it, ok := m.next()
		if !ok {
			break
		}
		last = it.key()
		examined++
		if x.live.contains(it.seq) && (!filtered || it.topic == want) {
			if !fn(Entry{Due: it.due, ID: it.id, Seq: it.seq, Topic: x.topics[it.topic]}) {
				return last, false, iterErr(iters)
			}
		}
		if limit > 0 && examined >= limit {
			return last, false, iterErr(iters)
		}
	}
	if err := iterErr(iters); err != nil {
		return last, false, err
	}
	return last, true, nil
}

// mergerLocked merges the buffer and the runs from after (from the runs'
// heads when fromStart).
func (x *Index) mergerLocked(after Key, fromStart bool) (*merger, []*runIter, error) {
	srcs := make([]source, 0, len(x.runs)+1)
	ci, ij := x.mem.seek(after)
	srcs = append(srcs, &memIter{m: &x.mem, ci: ci, ij: ij})
	iters := make([]*runIter, 0, len(x.runs))
	for _, r := range x.runs {
		pos := r.head
		if !fromStart {
			p, err := r.seek(after)
			if err != nil {
				return nil, nil, err
			}
			pos = max(pos, p)
		}
		it := newRunIter(r, pos)
		iters = append(iters, it)
		srcs = append(srcs, it)
	}
	return newMerger(srcs), iters, nil
}

func iterErr(iters []*runIter) error {
	for _, it := range iters {
		if it.err != nil {
			return it.err
		}
	}
	return nil
}

// trimHeadsLocked moves every run's head and the buffer's front past
// their dead entries.
func (x *Index) trimHeadsLocked() error {
	x.mem.dropFrontWhile(func(it item) bool { return !x.live.contains(it.seq) })
	for _, r := range x.runs {
		it := newRunIter(r, r.head)
		for {
			e, ok := it.peek()
			if !ok || x.live.contains(e.seq) {
				break
			}
			it.advance()
		}
		if it.err != nil {
			return it.err
		}
		r.head = it.pos
	}
	return nil
}

// Stats describes the index's size.
type Stats struct {
	Pending    int64 // pending records
	Buffered   int   // births in the buffer
	Runs       int   // run files
	RunEntries int64 // entries in run files, pending or not
	LiveBytes  int64 // memory of the live set
	Topics     int   // topic table size
}

// Stats reports the index's size.
func (x *Index) Stats() Stats {
	x.mu.Lock()
	defer x.mu.Unlock()
	st := Stats{Pending: x.live.total, Buffered: x.mem.len(), Runs: len(x.runs), LiveBytes: x.live.bytes(), Topics: len(x.topics)}
	for _, r := range x.runs {
		st.RunEntries += r.n
	}
	return st
}

// Checkpoint writes the buffer as a run and the checkpoint (see doc.go),
// then deletes the files no checkpoint lists any more. It does nothing
// when nothing changed.
func (x *Index) Checkpoint() error {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return ErrClosed
	}
	if x.recount {
		if err := x.recountLocked(); err != nil {
			x.mu.Unlock()
			return err
		}
	}
	kept := x.runs[:0:0]
	for _, r := range x.runs {
		if r.head >= r.n {
			x.obsolete = append(x.obsolete, r) // wholly dead
			x.version++
			continue
		}
		kept = append(kept, r)
	}
	x.runs = kept
	if x.version == x.saved && len(x.obsolete) == 0 {
		x.mu.Unlock()
		return nil
	}
	st := &state{pos: x.pos, topics: slices.Clone(x.topics), counts: slices.Clone(x.counts), live: x.live.clone()}
	for _, r := range x.runs {
		st.runs = append(st.runs, runMeta{id: r.id, tier: r.tier, n: r.n, head: r.head, crc: r.crc})
	}
	var buffered []item
	for _, it := range x.mem.sorted() {
		if x.live.contains(it.seq) {
			buffered = append(buffered, it)
		}
	}
	var id uint64
	if len(buffered) > 0 {
		id = x.nextRun
		x.nextRun++
	}
	st.nextRun = x.nextRun
	version, obsolete := x.version, x.obsolete
	x.obsolete = nil
	x.mu.Unlock()

	fail := func(nr *run, err error) error {
		if nr != nil {
			_ = nr.close()
			_ = os.Remove(nr.path)
		}
		x.mu.Lock()
		x.obsolete = append(x.obsolete, obsolete...)
		x.mu.Unlock()
		return err
	}
	var nr *run
	if len(buffered) > 0 {
		w, err := createRun(x.opts.Dir, id)
		if err != nil {
			return fail(nil, err)
		}
		for _, it := range buffered {
			if err := w.add(it); err != nil {
				w.abort()
				return fail(nil, err)
			}
		}
		if nr, err = w.finish(0); err != nil {
			return fail(nil, err)
		}
		st.runs = append(st.runs, runMeta{id: nr.id, tier: nr.tier, n: nr.n, crc: nr.crc})
	}
	if err := writeFileAtomic(filepath.Join(x.opts.Dir, checkpointName), st.encode()); err != nil {
		return fail(nr, fmt.Errorf("write timer index checkpoint: %w", err))
	}
	x.mu.Lock()
	if nr != nil {
		x.runs = append(x.runs, nr)
		x.mem.dropSeqsBelow(st.pos.Timers)
	}
	x.saved = version
	x.mu.Unlock()
	var errs []error
	for _, r := range obsolete {
		errs = append(errs, r.close(), os.Remove(r.path))
	}
	return errors.Join(errs...)
}

// recountLocked recomputes the per-topic counts from the entries.
func (x *Index) recountLocked() error {
	if err := x.trimHeadsLocked(); err != nil {
		return err
	}
	m, iters, err := x.mergerLocked(MinKey, true)
	if err != nil {
		return err
	}
	counts := make([]int64, len(x.topics))
	for it, ok := m.next(); ok; it, ok = m.next() {
		if x.live.contains(it.seq) {
			counts[it.topic]++
		}
	}
	if err := iterErr(iters); err != nil {
		return err
	}
	x.counts, x.recount = counts, false
	x.version++
	return nil
}

// Compact merges the oldest FanIn runs of the lowest tier that has as
// many into one run of the next tier, dropping dead entries, and
// checkpoints. It reports whether it merged.
func (x *Index) Compact() (bool, error) {
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		return false, ErrClosed
	}
	tiers := map[int][]*run{}
	for _, r := range x.runs {
		tiers[r.tier] = append(tiers[r.tier], r)
	}
	tier := -1
	for t, rs := range tiers {
		if len(rs) >= x.opts.FanIn && (tier < 0 || t < tier) {
			tier = t
		}
	}
	if tier < 0 || tier >= math.MaxUint8 {
		x.mu.Unlock()
		return false, nil
	}
	inputs := tiers[tier][:x.opts.FanIn]
	live := x.live.clone()
	id := x.nextRun
	x.nextRun++
	srcs := make([]source, len(inputs))
	iters := make([]*runIter, len(inputs))
	for i, r := range inputs {
		iters[i] = newRunIter(r, r.head)
		srcs[i] = iters[i]
	}
	x.mu.Unlock()

	// The inputs are immutable and only this goroutine deletes runs: read
	// them without the lock.
	out, err := mergeRuns(x.opts.Dir, id, tier+1, newMerger(srcs), iters, live)
	if err != nil {
		return false, err
	}
	x.mu.Lock()
	gone := map[*run]bool{}
	for _, r := range inputs {
		gone[r] = true
	}
	var runs []*run
	for _, r := range x.runs {
		switch {
		case !gone[r]:
			runs = append(runs, r)
		case r == inputs[0] && out != nil:
			runs = append(runs, out) // the merged run takes the place of the oldest input
		}
	}
	x.runs = runs
	x.obsolete = append(x.obsolete, inputs...)
	x.version++
	x.mu.Unlock()
	x.log.Debug().Int("inputs", len(inputs)).Int("tier", tier+1).Msg("timer runs merged")
	return true, x.Checkpoint()
}

// mergeRuns writes the pending items of m as run id (nil when none is).
func mergeRuns(dir string, id uint64, tier int, m *merger, iters []*runIter, live *liveSet) (*run, error) {
	w, err := createRun(dir, id)
	if err != nil {
		return nil, err
	}
	for it, ok := m.next(); ok; it, ok = m.next() {
		if !live.contains(it.seq) {
			continue
		}
		if err := w.add(it); err != nil {
			w.abort()
			return nil, err
		}
	}
	if err := iterErr(iters); err != nil {
		w.abort()
		return nil, err
	}
	if w.n == 0 {
		w.abort()
		return nil, nil
	}
	return w.finish(tier)
}

func (x *Index) closeRuns() error {
	var errs []error
	for _, r := range x.runs {
		errs = append(errs, r.close())
	}
	for _, r := range x.obsolete {
		errs = append(errs, r.close())
	}
	x.runs, x.obsolete = nil, nil
	return errors.Join(errs...)
}

// Close releases the run files. It does not checkpoint (call Checkpoint
// first). It is idempotent.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	return x.closeRuns()
}
