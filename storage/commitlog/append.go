package commitlog

import (
	"fmt"
)

// Append writes one record. In FlushSync it returns only after the msync
// that covers the record has succeeded (group commit: concurrent appenders
// share one flush); in FlushAsync it returns once the record is in the
// mapping. It does not allocate. After an error the record, if placed, is
// not known to be durable.
func (l *Log) Append(e Encoder) (AppendResult, error) {
	size, err := l.frameSize(e.Len())
	if err != nil {
		return AppendResult{}, err
	}
	res, err := l.place(e, size)
	if err != nil {
		return AppendResult{}, err
	}
	l.stats.appends.Add(1)
	return res, l.commit(res.end())
}

// place writes one frame under the append lock and publishes Written. The
// deferred unlock keeps the log usable if an Encoder panics (the frame is
// then never published).
func (l *Log) place(e Encoder, size int) (AppendResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return AppendResult{}, err
	}
	res, err := l.appendLocked(e, size)
	if err != nil {
		return AppendResult{}, err
	}
	l.written.Store(l.writePos)
	return res, nil
}

// AppendBatch writes all records under one lock acquisition and waits for
// one flush. res must have at least len(es) elements; res[i] locates
// es[i]. Sizes are checked before anything is written, so a too-large
// record fails the batch without writing any of it.
func (l *Log) AppendBatch(es []Encoder, res []AppendResult) error {
	if len(res) < len(es) {
		return fmt.Errorf("%w: %d results for %d records", ErrInvalidArgument, len(res), len(es))
	}
	if len(es) == 0 {
		return nil
	}
	for i, e := range es {
		if _, err := l.frameSize(e.Len()); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
	}
	if err := l.placeBatch(es, res); err != nil {
		return err
	}
	l.stats.appends.Add(int64(len(es)))
	return l.commit(res[len(es)-1].end())
}

// placeBatch is place for a batch whose sizes were checked.
func (l *Log) placeBatch(es []Encoder, res []AppendResult) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	for i, e := range es {
		size, _ := l.frameSize(e.Len())
		r, err := l.appendLocked(e, size)
		if err != nil {
			return err
		}
		res[i] = r
	}
	l.written.Store(l.writePos)
	return nil
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

// appendLocked places one frame of size bytes at the write position,
// rolling to the next segment first if the placement invariant requires
// it. Called with mu held; it does not publish Written.
func (l *Log) appendLocked(e Encoder, size int) (AppendResult, error) {
	left := l.active.end() - l.writePos
	if int64(size) != left && int64(size) > left-HeaderSize {
		if err := l.rollLocked(left); err != nil {
			return AppendResult{}, err
		}
	}
	pos := l.writePos
	rel := pos - l.active.base
	frame := l.active.data[rel : rel+int64(size)]
	putHeader(frame, size, RecordMagic, pos)
	e.Encode(frame[HeaderSize:], pos)
	sealFrame(frame) // over the mapped bytes, after Encode
	l.writePos = pos + int64(size)
	return AppendResult{Offset: pos, Size: int32(size)}, nil
}

// rollLocked closes the active segment with a Blank frame covering its
// left bytes (none if it is full; if fewer than HeaderSize are left, which
// only an operator-truncated segment allows, they stay zero) and switches
// to the preallocated next segment. A failure to get the next segment is
// fatal to the write path.
func (l *Log) rollLocked(left int64) error {
	old := l.active
	next, err := l.alloc.take(old.end())
	if err != nil {
		return l.fail(fmt.Errorf("roll to segment %d: %w", old.end(), err))
	}
	if left >= HeaderSize {
		writeBlank(old.data[l.writePos-old.base:], l.writePos)
	}
	l.segMu.Lock()
	l.segments = append(l.segments, next)
	l.segMu.Unlock()
	l.active = next
	l.writePos = next.base
	l.alloc.request(next.end())
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
