package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/consumequeue"
	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"github.com/mqgate/mqgate/storage/message"
)

// Repair of a data directory whose CommitLog lost durable data (a deleted
// or truncated segment, zeroed bytes): what `mqgate repair` runs. See
// doc.go, "Repair".

// KeptRange is a CommitLog range a repair keeps, with its record count.
type KeptRange struct {
	From    int64 `json:"from"`
	To      int64 `json:"to"`
	Records int64 `json:"records"`
}

// DamagedRange is a CommitLog range a repair gives up.
type DamagedRange struct {
	LostRange
	// Missing counts the bytes of the range no file holds.
	Missing int64 `json:"missing"`
}

// RepairReport is what Repair found and, with Apply, did.
type RepairReport struct {
	Dir string `json:"dir"`
	// HighWater is the checkpointed durable offset (0 without a valid
	// checkpoint).
	HighWater int64 `json:"highWater"`
	// Segments counts the segment files found.
	Segments int `json:"segments"`
	// Kept lists the ranges of intact frames that stay, Damaged the ranges
	// given up, in log order.
	Kept    []KeptRange    `json:"kept"`
	Damaged []DamagedRange `json:"damaged"`
	// Lost lists, per queue, the runs of queue offsets whose records were
	// in the damaged ranges; LostMessages is their total.
	Lost         []LostQueue `json:"lost"`
	LostMessages int64       `json:"lostMessages"`
	// Floors is where each damaged queue's offsets continue at least.
	Floors []LostQueue `json:"floors"`
	// End is where the CommitLog continues after the repair.
	End int64 `json:"end"`
	// Applied is set when the repair was made (RepairOptions.Apply and
	// something to repair); Broken names the .broken copies it made.
	Applied bool     `json:"applied"`
	Broken  []string `json:"broken,omitempty"`
}

// RepairOptions configures Repair.
type RepairOptions struct {
	// Store is the store's options (Dir at least); with Apply, the store
	// is opened with them once the CommitLog is repaired, which rebuilds
	// the derived files, and closed.
	Store Options
	// Apply makes the repair; without it Repair changes nothing.
	Apply bool
}

// Repair surveys the CommitLog of a store that is not open (it takes the
// directory's lock) and reports what a repair keeps and gives up: every
// intact frame before and after each damaged range is kept at its offset,
// each damaged range is blanked (its bytes copied to .broken files first),
// and the queue offsets of the lost records stay taken. With Apply it
// makes the repair, records it in config/repair.json, and opens and closes
// the store so that its derived files are rebuilt.
func Repair(o RepairOptions) (RepairReport, error) {
	opts := o.Store
	if err := opts.Validate(); err != nil {
		return RepairReport{}, err
	}
	segmentSize := opts.SegmentSize // 0: the survey infers it from the files
	opts = opts.withDefaults()
	rep := RepairReport{Dir: opts.Dir}
	if _, err := os.Stat(filepath.Join(opts.Dir, "commitlog")); err != nil {
		return rep, fmt.Errorf("%s is not a data directory: %w", opts.Dir, err)
	}
	lock, err := fileutil.LockDir(opts.Dir)
	if err != nil {
		if errors.Is(err, fileutil.ErrLocked) {
			return rep, fmt.Errorf("%w: %s (stop the server first)", ErrLocked, opts.Dir)
		}
		return rep, err
	}
	locked := true
	defer func() {
		if locked {
			lock.Unlock()
		}
	}()
	meta := &Store{opts: opts}
	ckpt, ckErr := readCheckpoint(opts.FS, opts.Dir)
	if ckErr == nil {
		rep.HighWater = ckpt.Flushed
	}
	table, tErr := readQueueTable(opts.FS, opts.Dir)
	if tErr != nil {
		table = queueTable{indexedPhy: -1, queues: map[queueKey]queueBounds{}}
	}

	t := newLossTracker(table, filepath.Join(opts.Dir, "consumequeue"))
	var kept []int64 // records per kept range (between damaged ranges)
	survey, err := commitlog.SurveyDir(filepath.Join(opts.Dir, "commitlog"), rep.HighWater, segmentSize,
		func(offset int64, _ int32, payload []byte, damagedBefore int) {
			for len(kept) <= damagedBefore {
				kept = append(kept, 0)
			}
			kept[damagedBefore]++
			var info message.DispatchInfo
			if message.DecodeDispatch(payload, &info) != nil {
				return
			}
			t.record(queueKey{string(info.Topic), info.QueueID}, info.QueueOffset, offset, damagedBefore)
		})
	if err != nil {
		return rep, err
	}
	rep.Segments = len(survey.Segments)
	rep.End = survey.End
	for _, d := range survey.Damaged {
		rep.Damaged = append(rep.Damaged, DamagedRange{LostRange: LostRange{From: d.From, To: d.To, Reason: d.Reason, InPlace: d.InPlace}, Missing: d.Missing})
	}
	if len(survey.Segments) > 0 {
		from := survey.Segments[0].Base
		for i := 0; i <= len(rep.Damaged); i++ {
			to := survey.End
			if i < len(rep.Damaged) {
				to = rep.Damaged[i].From
			}
			var n int64
			if i < len(kept) {
				n = kept[i]
			}
			if to > from || n > 0 {
				rep.Kept = append(rep.Kept, KeptRange{From: from, To: to, Records: n})
			}
			if i < len(rep.Damaged) {
				from = rep.Damaged[i].To
			}
		}
	}
	firstBase := int64(0)
	if len(survey.Segments) > 0 {
		firstBase = survey.Segments[0].Base
	}
	rep.Lost, rep.Floors = t.finish(len(rep.Damaged), firstBase, rep.Damaged)
	for _, l := range rep.Lost {
		rep.LostMessages += l.To - l.From
	}
	if !o.Apply || len(rep.Damaged) == 0 {
		return rep, nil
	}

	// Apply: the log first (every file durable), then the record of what
	// was given up, then a checkpoint the repaired log satisfies.
	rep.Broken, err = commitlog.PatchDir(opts.FS, filepath.Join(opts.Dir, "commitlog"), survey)
	if err != nil {
		return rep, fmt.Errorf("repair the CommitLog: %w", err)
	}
	lg, err := meta.readRepairLog()
	if err != nil {
		return rep, err
	}
	rec := RepairRecord{At: time.Now().UTC().Truncate(time.Millisecond), Queues: rep.Lost, Floors: rep.Floors, Broken: rep.Broken}
	for _, d := range rep.Damaged {
		rec.Ranges = append(rec.Ranges, d.LostRange)
	}
	lg.Repairs = append(lg.Repairs, rec)
	b, err := json.MarshalIndent(lg, "", "  ")
	if err != nil {
		return rep, err
	}
	if err := meta.WriteMeta(repairFile, b); err != nil {
		return rep, err
	}
	if ckErr == nil {
		// Recovery verifies from the first damaged range on (or the
		// checkpoint's dispatched offset, if lower) to the new end.
		c := checkpoint{Flushed: max(ckpt.Flushed, survey.End), Dispatched: min(ckpt.Dispatched, rep.Damaged[0].From), WrittenAt: time.Now().UnixMilli()}
		if err := writeCheckpoint(opts.FS, opts.Dir, c); err != nil {
			return rep, err
		}
	}
	rep.Applied = true
	if segmentSize == 0 && survey.SegmentSize >= 4096 {
		// What the log is made of, not 1 GiB (Open preallocates the next
		// segment). The store only reads: MaxMessageSize limits puts.
		opts.SegmentSize = survey.SegmentSize
		opts.MaxMessageSize = min(opts.MaxMessageSize, int(opts.SegmentSize)-commitlog.HeaderSize)
	}
	locked = false
	if err := lock.Unlock(); err != nil {
		return rep, err
	}
	s, err := Open(opts)
	if err != nil {
		return rep, fmt.Errorf("the CommitLog is repaired, but opening the store failed: %w", err)
	}
	if err := s.Close(); err != nil {
		return rep, fmt.Errorf("the CommitLog is repaired, but closing the store failed: %w", err)
	}
	return rep, nil
}

// lossTracker works out which queue offsets the damaged ranges held: a
// queue's records lie in the log in queue-offset order, so a jump in a
// queue's offsets across a damaged range is that many records lost there,
// and so is the distance from a queue's last surviving record to the
// highest offset it had given out (the queue table's, or its ConsumeQueue
// files').
type lossTracker struct {
	table  queueTable
	cqRoot string
	queues map[queueKey]*queueTrack
	lost   []LostQueue
}

type queueTrack struct {
	last    int64 // queue offset of the last surviving record
	damaged int   // damaged ranges before it
}

func newLossTracker(table queueTable, cqRoot string) *lossTracker {
	return &lossTracker{table: table, cqRoot: cqRoot, queues: map[queueKey]*queueTrack{}}
}

func (t *lossTracker) record(key queueKey, qoff, _ int64, damagedBefore int) {
	q := t.queues[key]
	if q == nil {
		if lo := t.table.queues[key].min; damagedBefore > 0 && qoff > lo {
			t.lost = append(t.lost, LostQueue{Topic: key.topic, QueueID: key.id, From: lo, To: qoff, Range: damagedBefore - 1})
		}
		t.queues[key] = &queueTrack{last: qoff, damaged: damagedBefore}
		return
	}
	if qoff > q.last+1 && damagedBefore > q.damaged {
		t.lost = append(t.lost, LostQueue{Topic: key.topic, QueueID: key.id, From: q.last + 1, To: qoff, Range: q.damaged})
	}
	if qoff > q.last {
		q.last, q.damaged = qoff, damagedBefore
	}
}

// finish adds the losses at the end of each queue and returns the losses,
// sorted, and each damaged queue's floor.
func (t *lossTracker) finish(damaged int, firstBase int64, ranges []DamagedRange) (lost, floors []LostQueue) {
	if damaged > 0 {
		keys := map[queueKey]bool{}
		for k := range t.table.queues {
			keys[k] = true
		}
		for k := range t.queues {
			keys[k] = true
		}
		for k := range rawQueueKeys(t.cqRoot) {
			keys[k] = true
		}
		for key := range keys {
			tb, inTable := t.table.queues[key]
			known, lastPhy := tb.max, tb.lastPhy
			if !inTable {
				lastPhy = -1
			}
			if m, phy, ok := rawQueueMax(filepath.Join(t.cqRoot, key.topic, strconv.Itoa(int(key.id)))); ok && m > known {
				known, lastPhy = m, phy
			}
			if q := t.queues[key]; q != nil {
				if known > q.last+1 && q.damaged < damaged {
					t.lost = append(t.lost, LostQueue{Topic: key.topic, QueueID: key.id, From: q.last + 1, To: known, Range: q.damaged})
				}
				continue
			}
			// No record of the queue survived: if its last one was in the
			// retained log, everything from its minimum on was lost.
			if known > tb.min && lastPhy >= firstBase {
				r := 0
				for i, d := range ranges {
					if lastPhy >= d.From && lastPhy < d.To {
						r = i
					}
				}
				t.lost = append(t.lost, LostQueue{Topic: key.topic, QueueID: key.id, From: tb.min, To: known, Range: r})
			}
		}
	}
	sort.Slice(t.lost, func(i, j int) bool {
		a, b := t.lost[i], t.lost[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.QueueID != b.QueueID {
			return a.QueueID < b.QueueID
		}
		return a.From < b.From
	})
	byKey := map[queueKey]int64{}
	for _, l := range t.lost {
		key := queueKey{l.Topic, l.QueueID}
		byKey[key] = max(byKey[key], l.To)
	}
	for key, to := range byKey {
		floors = append(floors, LostQueue{Topic: key.topic, QueueID: key.id, To: to})
	}
	sort.Slice(floors, func(i, j int) bool {
		if floors[i].Topic != floors[j].Topic {
			return floors[i].Topic < floors[j].Topic
		}
		return floors[i].QueueID < floors[j].QueueID
	})
	return t.lost, floors
}

// rawQueueKeys lists the ConsumeQueue directories under root, read-only.
func rawQueueKeys(root string) map[queueKey]bool {
	out := map[queueKey]bool{}
	topics, _ := os.ReadDir(root)
	for _, tp := range topics {
		if !tp.IsDir() {
			continue
		}
		ids, _ := os.ReadDir(filepath.Join(root, tp.Name()))
		for _, d := range ids {
			if id, err := strconv.ParseInt(d.Name(), 10, 32); err == nil && d.IsDir() {
				out[queueKey{tp.Name(), int32(id)}] = true
			}
		}
	}
	return out
}

// rawQueueMax reads a ConsumeQueue directory without opening it (which
// could change it): the offset after its last non-empty entry and that
// entry's CommitLog offset.
func rawQueueMax(dir string) (max, lastPhy int64, ok bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, false
	}
	var files []int64
	for _, e := range entries {
		if n, ok := fileutil.ParseNumberedName(e.Name()); ok && !e.IsDir() {
			files = append(files, n)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i] > files[j] })
	for _, first := range files {
		b, err := os.ReadFile(filepath.Join(dir, fileutil.NumberedName(first)))
		if err != nil {
			continue
		}
		for i := len(b)/consumequeue.EntrySize - 1; i >= 0; i-- {
			e := b[i*consumequeue.EntrySize : (i+1)*consumequeue.EntrySize]
			if size := binary.BigEndian.Uint32(e[8:12]); size > 0 {
				return first/consumequeue.EntrySize + int64(i) + 1, int64(binary.BigEndian.Uint64(e[0:8])), true
			}
		}
	}
	return 0, 0, false
}

// WriteText prints the report for an operator.
func (r RepairReport) WriteText(w io.Writer, apply bool) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	hw := "no valid checkpoint"
	if r.HighWater > 0 {
		hw = fmt.Sprintf("durable up to offset %d (checkpoint)", r.HighWater)
	}
	p("data dir %s: CommitLog of %d segment files, %s\n", r.Dir, r.Segments, hw)
	if len(r.Damaged) == 0 {
		p("no damaged range found: nothing to repair\n")
		return
	}
	p("\nkeep (intact frames, at their offsets):\n")
	var kept int64
	if len(r.Kept) == 0 {
		p("  nothing\n")
	}
	for _, k := range r.Kept {
		p("  [%d, %d)  %d records\n", k.From, k.To, k.Records)
		kept += k.Records
	}
	p("\ngive up (blanked, or a damaged record left in place; the bytes are copied to commitlog/<segment>.broken first):\n")
	for i, d := range r.Damaged {
		p("  #%d [%d, %d)  %d bytes, %d of them in no file: %s\n", i, d.From, d.To, d.To-d.From, d.Missing, d.Reason)
	}
	p("\nlost messages: %d (intact records kept: %d)\n", r.LostMessages, kept)
	byTopic := map[string]int64{}
	var topics []string
	for _, l := range r.Lost {
		if _, ok := byTopic[l.Topic]; !ok {
			topics = append(topics, l.Topic)
		}
		byTopic[l.Topic] += l.To - l.From
		p("  %s queue %d: offsets [%d, %d), %d messages (range #%d)\n", l.Topic, l.QueueID, l.From, l.To, l.To-l.From, l.Range)
	}
	if len(topics) > 0 {
		p("per topic:\n")
		for _, t := range topics {
			p("  %s: %d\n", t, byTopic[t])
		}
	}
	p("\nqueue offsets continue above every offset given out; the CommitLog continues at %d\n", r.End)
	switch {
	case r.Applied:
		p("\nrepaired: copies of the damaged bytes: %v; recorded in config/%s\n", r.Broken, repairFile)
	case !apply:
		p("\ndry run: nothing was changed; run again with --apply to repair\n")
	}
}
