package commitlog

import (
	"fmt"
	"slices"

	"github.com/mqgate/mqgate/storage/internal/vfs"
)

// Use says whether an append may take the log's reserve: the room kept,
// allocated, for the broker's own records on a full file system (see
// "Disk space" in doc.go).
type Use uint8

const (
	// UseReserve appends may use every allocated byte, the reserve
	// included: records that keep promises made for data already
	// accepted (acknowledgements, retries). Append, AppendBatch and
	// AppendBatchNoWait use it.
	UseReserve Use = iota
	// KeepReserve appends are refused with ErrNoSpace unless the reserve
	// stays whole after them: producers' messages.
	KeepReserve
)

// String is "use-reserve" or "keep-reserve".
func (u Use) String() string {
	if u == KeepReserve {
		return "keep-reserve"
	}
	return "use-reserve"
}

// Append writes one record. In FlushSync it returns only after the fdatasync
// that covers the record has succeeded (group commit: concurrent appenders
// share one flush); in FlushAsync it returns once the record is in the
// page cache. It does not allocate. After an error the record, if placed, is
// not known to be durable.
func (l *Log) Append(e Encoder) (AppendResult, error) { return l.AppendUse(UseReserve, e) }

// AppendUse is Append for an append of the given Use.
func (l *Log) AppendUse(u Use, e Encoder) (AppendResult, error) {
	size, err := l.frameSize(e.Len())
	if err != nil {
		return AppendResult{}, err
	}
	res, err := l.place(e, size, u)
	if err != nil {
		return AppendResult{}, err
	}
	l.stats.appends.Add(1)
	return res, l.commit(res.end())
}

// place writes one frame under the append lock and publishes Written. The
// deferred unlock keeps the log usable if an Encoder panics (the frame is
// then never written).
func (l *Log) place(e Encoder, size int, u Use) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	l.sizes = append(l.sizes[:0], size)
	if err := l.planLocked(l.sizes, u); err != nil {
		return AppendResult{}, err
	}
	defer l.unstageLocked()
	res, err := l.appendLocked(e, size, l.rolls[0])
	if err != nil {
		return AppendResult{}, err
	}
	l.growLocked()
	return res, l.endAppendLocked(true)
}

// endAppendLocked ends an append whose frames are staged. In FlushSync an
// append that waits for its flush leaves them staged: the flush that
// covers it writes the frames of every append it covers with one pwrite
// (flushOnce), and publishes Written then. Any other append writes its
// frames now and publishes Written.
func (l *Log) endAppendLocked(waits bool) error {
	if waits && l.opts.FlushMode == FlushSync {
		l.staged = len(l.stage)
		return nil
	}
	return l.writeStagedLocked()
}

// writeStagedLocked writes the staged frames and publishes Written (an
// append that does not wait, or flushOnce before its fdatasync).
func (l *Log) writeStagedLocked() error {
	if err := l.writeStageLocked(); err != nil {
		return err
	}
	l.written.Store(l.writePos)
	select {
	case l.appended <- struct{}{}:
	default:
	}
	return nil
}

// AppendBatch writes all records under one lock acquisition and waits for
// one flush. res must have at least len(es) elements; res[i] locates
// es[i]. Sizes are checked before anything is written, so a too-large
// record fails the batch without writing any of it.
func (l *Log) AppendBatch(es []Encoder, res []AppendResult) error {
	return l.AppendBatchUse(UseReserve, es, res)
}

// AppendBatchUse is AppendBatch for appends of the given Use.
func (l *Log) AppendBatchUse(u Use, es []Encoder, res []AppendResult) error {
	end, err := l.appendBatch(es, res, true, u)
	if err != nil || end < 0 {
		return err
	}
	return l.commit(end)
}

// AppendBatchStagedUse is AppendBatchUse in two steps: it places the batch
// now, in log order, and returns the end to pass to WaitDurable, which
// waits for the batch's flush (group commit, as AppendBatchUse). A caller
// appends under the lock that orders its change — so the log holds changes
// in the order they were made — and waits for the flush after releasing
// it. The end is -1 for an empty batch.
func (l *Log) AppendBatchStagedUse(u Use, es []Encoder, res []AppendResult) (int64, error) {
	return l.appendBatch(es, res, true, u)
}

// AppendBatchNoWait is AppendBatch without the wait for the flush: once it
// returns the records are in the file (so they survive a crash of the
// process, which leaves the page cache to the kernel), but a crash of the
// machine before the next flush — the next waiting append's, or at the
// latest LazyFlushDelay later — can take them back. It is for records whose loss costs a repeat, never data: the
// broker's lease records (a lost one only delivers its message again
// sooner). Any later append that waits for its flush covers these records
// too, since a flush covers a prefix of the log.
func (l *Log) AppendBatchNoWait(es []Encoder, res []AppendResult) error {
	return l.AppendBatchNoWaitUse(UseReserve, es, res)
}

// AppendBatchNoWaitUse is AppendBatchNoWait for appends of the given Use.
func (l *Log) AppendBatchNoWaitUse(u Use, es []Encoder, res []AppendResult) error {
	end, err := l.appendBatch(es, res, false, u)
	if err != nil || end < 0 {
		return err
	}
	if l.opts.FlushMode == FlushAsync {
		l.nudge()
		return nil
	}
	select {
	case l.lazy <- struct{}{}:
	default:
	}
	return nil
}

// appendBatch checks and places a batch; end is the log offset after its
// last record, -1 for an empty batch; waits says whether the caller waits
// for its flush (endAppendLocked).
func (l *Log) appendBatch(es []Encoder, res []AppendResult, waits bool, u Use) (end int64, err error) {
	if len(res) < len(es) {
		return -1, fmt.Errorf("%w: %d results for %d records", ErrInvalidArgument, len(res), len(es))
	}
	if len(es) == 0 {
		return -1, nil
	}
	for i, e := range es {
		if _, err := l.frameSize(e.Len()); err != nil {
			return -1, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if err := l.placeBatch(es, res, waits, u); err != nil {
		return -1, err
	}
	l.stats.appends.Add(int64(len(es)))
	return res[len(es)-1].end(), nil
}

// placeBatch is place for a batch whose sizes were checked. Every segment
// the batch will roll into is created before its first record is written,
// so a batch is refused whole (ErrNoSpace) or placed whole.
func (l *Log) placeBatch(es []Encoder, res []AppendResult, waits bool, u Use) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	l.sizes = l.sizes[:0]
	for _, e := range es {
		size, _ := l.frameSize(e.Len())
		l.sizes = append(l.sizes, size)
	}
	if err := l.planLocked(l.sizes, u); err != nil {
		return err
	}
	defer l.unstageLocked()
	for i, e := range es {
		r, err := l.appendLocked(e, l.sizes[i], l.rolls[i])
		if err != nil {
			return err
		}
		res[i] = r
	}
	l.growLocked()
	return l.endAppendLocked(waits)
}

// planLocked decides, before anything is written, where the frames of
// sizes go and makes sure every byte they (and the Blank frames before
// the rolls) will be written to is allocated, so that no write can meet a
// full disk (a pwrite failing would kill the write path, and a store into
// the mapping would raise SIGBUS). l.rolls[i] says whether frame i starts
// the next segment. A frame rolls when it does not fit (the placement
// invariant), or — UseReserve only — when its segment cannot be given
// more blocks: it then goes on into the next segment, whose first Reserve
// bytes were allocated when it was created. A KeepReserve append is
// refused instead, and also unless the segment after its last one exists
// (with its reserve allocated), so the reserve is always there for the
// others. Any refusal is ErrNoSpace and leaves the log as it was.
func (l *Log) planLocked(sizes []int, u Use) (err error) {
	defer func() {
		if err != nil {
			l.noSpace[u].Store(true)
		} else {
			l.noSpace[u].Store(false)
		}
	}()
	l.rolls = l.rolls[:0]
	seg, k, pos := l.active, 0, l.writePos
	for _, size := range sizes {
		end := pos + int64(size)
		roll := !fits(seg.end()-pos, size)
		if !roll {
			if err := seg.allocate(end + HeaderSize - seg.base); err != nil {
				if u == KeepReserve || pos == seg.base {
					return l.noSpaceErr(seg, err)
				}
				roll = true
			}
		}
		if roll {
			// The Blank frame's header at pos (when it fits).
			if err := seg.allocate(min(pos+HeaderSize, seg.end()) - seg.base); err != nil {
				return l.noSpaceErr(seg, err)
			}
			k++
			if err := l.reserveLocked(k); err != nil {
				return err
			}
			seg, pos = l.reserve[k-1], l.reserve[k-1].base
			end = pos + int64(size)
			if err := seg.allocate(end + HeaderSize - seg.base); err != nil {
				return l.noSpaceErr(seg, err)
			}
		}
		l.rolls = append(l.rolls, roll)
		pos = end
	}
	if u == KeepReserve {
		return l.reserveLocked(k + 1)
	}
	return nil
}

// noSpaceErr is the ErrNoSpace of an allocation that failed in seg.
func (l *Log) noSpaceErr(seg *segment, err error) error {
	l.stats.allocFailures.Add(1)
	return fmt.Errorf("%w: allocating in segment %d: %w", ErrNoSpace, seg.base, err)
}

// growLocked asks the allocator for more blocks ahead of the write
// position once less than half the window is left (aheadFor), and for
// the segment after the reserved one once the active segment is nearly
// full (less than a window, or half of it, left), so that a KeepReserve
// append rolling into the reserved segment finds the following one
// ready, without keeping two segments' reserves allocated all along.
func (l *Log) growLocked() {
	s := l.active
	rel := l.writePos - s.base
	if !l.allocPending && len(l.reserve) == 1 && s.size-rel < min(aheadMax, s.size/2) {
		l.alloc.request(l.reserve[0].end())
		l.allocPending = true
	}
	if a := s.allocated.Load(); a < s.size && a-rel < aheadFor(rel)/2 {
		l.growSeg.Store(s)
		l.growRel.Store(rel)
		l.alloc.kickGrow()
	}
}

// growActive allocates the window ahead of the write position in the
// active segment (aheadFor), on the allocator's goroutine: appends then
// find their blocks allocated. A failure (a full disk) is left to the
// appends, which allocate what they need themselves and are refused when
// they cannot.
//
// It must not take mu: an append holding mu may be waiting for the
// allocator (reserveLocked). growLocked leaves it the segment and the
// position.
func (l *Log) growActive() {
	s, rel := l.growSeg.Load(), l.growRel.Load()
	if s == nil {
		return
	}
	if err := s.allocate(rel + aheadFor(rel)); err != nil {
		l.log.Debug().Err(err).Int64("segment", s.base).Msg("allocating ahead of the write position failed")
	}
}

// Room reports the bytes allocated ahead of the write position for
// UseReserve appends — what is left in the active segment and the
// reserve of the next one, if it exists — and whether the last append of
// each Use was refused with ErrNoSpace (noSpace[KeepReserve] is true once
// producers are refused for want of room; noSpace[UseReserve] once even
// the reserve is gone).
func (l *Log) Room() (bytes int64, noSpace [2]bool) {
	l.mu.Lock()
	bytes = l.active.room(l.writePos - l.active.base)
	if len(l.reserve) > 0 {
		bytes += l.reserve[0].allocated.Load()
	} else if p := l.alloc.prepared.Load(); p != nil && p.base == l.active.end() {
		bytes += p.allocated.Load()
	}
	l.mu.Unlock()
	return bytes, [2]bool{l.noSpace[UseReserve].Load(), l.noSpace[KeepReserve].Load()}
}

// end is the log offset just after the record.
func (r AppendResult) end() int64 { return r.Offset + int64(r.Size) }

// frameSize is the frame size for a payload of n bytes, or
// ErrRecordTooLarge if no segment can hold it (see the placement invariant).
func (l *Log) frameSize(n int) (int, error) {
	if n < 0 {
		return 0, fmt.Errorf("%w: negative payload length %d", ErrInvalidArgument, n)
	}
	size := int64(n) + HeaderSize
	limit := l.opts.SegmentSize
	if size > limit || (size != limit && size > limit-HeaderSize) {
		return 0, fmt.Errorf("%w: frame of %d bytes, segment of %d", ErrRecordTooLarge, size, limit)
	}
	return int(size), nil
}

func (l *Log) writableLocked() error {
	if l.closed {
		return ErrClosed
	}
	if f := l.failure.Load(); f != nil {
		return f.err
	}
	return nil
}

// fits reports whether a frame of size bytes may go into a segment with
// left bytes free (the placement invariant: it fills them exactly or
// leaves room for a header).
func fits(left int64, size int) bool {
	return int64(size) == left || int64(size) <= left-HeaderSize
}

// appendLocked places one frame of size bytes at the write position,
// rolling to the next segment first if planLocked said so (or the
// placement invariant requires it). Called with mu held, after planLocked
// made sure the segments it rolls into exist and its bytes are allocated. The frame is encoded into the stage buffer, which
// writeStageLocked writes to the file; it does not publish Written.
func (l *Log) appendLocked(e Encoder, size int, roll bool) (AppendResult, error) {
	left := l.active.end() - l.writePos
	if roll || !fits(left, size) {
		if err := l.rollLocked(left); err != nil {
			return AppendResult{}, err
		}
	}
	pos := l.writePos
	if len(l.stage) == 0 {
		l.stageAt = pos
	}
	n := len(l.stage)
	l.stage = slices.Grow(l.stage, size)[:n+size] // every byte is written below
	frame := l.stage[n : n+size]
	putHeader(frame, size, RecordMagic, pos)
	e.Encode(frame[HeaderSize:], pos)
	sealFrame(frame) // over the staged bytes, after Encode
	l.writePos = pos + int64(size)
	return AppendResult{Offset: pos, Size: int32(size)}, nil
}

// maxKeptStage is the largest stage buffer kept between appends; a bigger
// one (a batch of large records) is dropped after use.
const maxKeptStage = 4 << 20

// writeStageLocked writes the staged frames (all in the active segment,
// from stageAt) to the file: with one pwrite in FlushSync, by a copy into
// the mapping in FlushAsync (see the package documentation, "Writes"). A
// failed write is fatal to the write path, as a failed flush is: some of
// its bytes may be in the page cache already, beyond Written, and nothing
// may be built on them.
func (l *Log) writeStageLocked() error {
	if len(l.stage) == 0 {
		return nil
	}
	rel := l.stageAt - l.active.base
	if l.opts.FlushMode == FlushAsync {
		copy(l.active.data[rel:], l.stage)
		l.stage, l.staged = l.stage[:0], 0
		return nil
	}
	if _, err := l.active.file.WriteAt(l.stage, rel); err != nil {
		return l.fail(fmt.Errorf("write [%d,%d): %w", l.stageAt, l.stageAt+int64(len(l.stage)), err))
	}
	l.stage, l.staged = l.stage[:0], 0
	return nil
}

// zeroAheadLocked keeps the active segment written with zeros up to
// ZeroAhead bytes past the write position (topping it up once less than
// half is left), so that small flushes land in written blocks: the
// fdatasync of a frame written into a fallocate'd ("unwritten") block also
// commits the block's conversion to the file system's journal, which costs
// as much again as the flush. Called with mu held and nothing staged, so
// no frame can be written into the range meanwhile; the zeros become
// durable with the next flush (and are zeros either way after a crash).
// A failed write only stops the zeros: nothing relies on them.
func (l *Log) zeroAheadLocked() {
	if l.opts.ZeroAhead <= 0 || l.zeroFailed || len(l.stage) > 0 {
		return
	}
	s := l.active
	if l.zeroedTo < l.writePos || l.zeroedTo > s.end() {
		l.zeroedTo = l.writePos // a new segment, or frames past the zeros
	}
	if l.zeroedTo-l.writePos >= l.opts.ZeroAhead/2 {
		return
	}
	// Only into allocated blocks: a write into a hole could meet a full
	// disk.
	end := min(l.writePos+l.opts.ZeroAhead, s.base+s.allocated.Load())
	if end <= l.zeroedTo {
		return
	}
	if err := vfs.WriteZeros(s.file, l.zeroedTo-s.base, end-l.zeroedTo); err != nil {
		l.zeroFailed = true
		l.log.Warn().Err(err).Msg("writing zeros ahead of the frames failed; not trying again")
		return
	}
	l.zeroedTo = end
}

// unstageLocked drops the frames an append left staged and unfinished (an
// Encoder panicked, or a roll failed), keeping those of earlier appends
// that wait for the flush (staged): the write position goes back to the
// end of those, so nothing is skipped over. It also drops a stage buffer
// grown past maxKeptStage once nothing is staged.
func (l *Log) unstageLocked() {
	if len(l.stage) > l.staged {
		l.writePos = l.stageAt + int64(l.staged)
		l.stage = l.stage[:l.staged]
	}
	if l.staged == 0 && cap(l.stage) > maxKeptStage {
		l.stage = nil
	}
}

// reserveLocked makes sure the next n segments after the active one exist
// (created by the allocator, never written) before anything is written.
// The allocator is asked for the segment after the active one at Open and
// at each roll, so it is usually ready before it is needed; only one
// segment past the active is prepared ahead (its first Reserve bytes
// allocated), so the log's footprint stays small.
// After a failure nothing is asked: the next append that needs the
// segment asks afresh, so it sees the disk as it is then, not as it was
// (appends resume with the first one after space returns). A failure is
// ErrNoSpace and leaves the log as it was: it is not a write-path failure
// (no byte of a record was written, nothing is lost, Err stays nil).
func (l *Log) reserveLocked(n int) error {
	for len(l.reserve) < n {
		base := l.active.end()
		if k := len(l.reserve); k > 0 {
			base = l.reserve[k-1].end()
		}
		if !l.allocPending {
			l.alloc.request(base)
		}
		seg, err := l.alloc.take(base)
		l.allocPending = false
		if err != nil {
			l.stats.allocFailures.Add(1)
			return fmt.Errorf("%w: segment %d: %w", ErrNoSpace, base, err)
		}
		l.reserve = append(l.reserve, seg)
	}
	return nil
}

// rollLocked closes the active segment with a Blank frame covering its
// left bytes (none if it is full; if fewer than HeaderSize are left, which
// only an operator-truncated segment allows, they stay zero) and switches
// to the first reserved segment.
func (l *Log) rollLocked(left int64) error {
	if err := l.reserveLocked(1); err != nil {
		return err
	}
	next := l.reserve[0]
	if left >= HeaderSize {
		if len(l.stage) == 0 {
			l.stageAt = l.writePos
		}
		n := len(l.stage)
		l.stage = slices.Grow(l.stage, HeaderSize)[:n+HeaderSize]
		// Only the header is written: the bytes it covers are not
		// checksummed and nothing reads them.
		writeBlankHeader(l.stage[n:], int(left), l.writePos)
	}
	if err := l.writeStageLocked(); err != nil {
		return err
	}
	l.reserve = append(l.reserve[:0], l.reserve[1:]...)
	l.segMu.Lock()
	l.segments = append(l.segments, next)
	l.segMu.Unlock()
	l.active = next
	l.writePos = next.base
	if len(l.reserve) == 0 && !l.allocPending {
		// Prepare the next segment now, so that it is usually ready
		// when an append needs it (a roll, or a KeepReserve append).
		l.alloc.request(next.end())
		l.allocPending = true
	}
	l.stats.rolls.Add(1)
	return nil
}

// commit makes an append visible to the flush policy: FlushSync waits for
// a flush that covers end; FlushAsync nudges the dispatcher and returns.
func (l *Log) commit(end int64) error {
	if l.opts.FlushMode == FlushAsync {
		l.nudge()
		return nil
	}
	return l.waitFlushed(end)
}

// nudge tells the Notify consumer that something advanced.
func (l *Log) nudge() {
	select {
	case l.notify <- struct{}{}:
	default:
	}
}
