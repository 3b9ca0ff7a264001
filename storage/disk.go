package storage

import (
	"fmt"

	"github.com/mqgate/mqgate/storage/commitlog"
	"github.com/mqgate/mqgate/storage/internal/fileutil"
	"math"
	"sync/atomic"
	"time"
)

// Disk space (see doc.go, "Disk space"). The used fraction of the file
// system is sampled every DiskCheckInterval, at every retention pass, and
// on the write path once the CommitLog has grown by diskResampleBytes
// since the last sample; each append compares the last sample with the
// ceiling of its class (for ClassSystem, the sample less the CommitLog's
// room allocated ahead, which is kept for those records). Room the CommitLog cannot allocate (a full file
// system) refuses the append with ErrDiskFull too; producers' messages
// are refused before they would take the reserve kept for the others
// (commitlog.KeepReserve), and appends resume with the first one after
// space returns.

// diskResampleBytes: an append samples the disk afresh once the CommitLog
// has grown by this much since the last sample, so a fast producer cannot
// outrun DiskCheckInterval and write past its ceiling.
const diskResampleBytes = 1 << 20

// Class says which disk ceiling an append is held to.
type Class uint8

const (
	// ClassSend is a producer's message: refused above DiskSendCeiling.
	// Put and PutBatch append in this class.
	ClassSend Class = iota
	// ClassSystem is a record that keeps a promise made for messages
	// already accepted: acknowledgements and offset commits, retry and
	// dead-letter copies of failed deliveries, status records, the
	// deliveries of delayed messages and timers. Refused only above
	// DiskSystemCeiling, and may use the CommitLog's reserve, so
	// consumers keep draining a full disk.
	ClassSystem
	// ClassReclaim is a copy that lets retention delete a segment (dead
	// letters and pending timers carried forward): never refused by a
	// ceiling, since refusing it would keep the space from being freed.
	ClassReclaim
)

// String names the class for logs and errors.
func (c Class) String() string {
	switch c {
	case ClassSend:
		return "send"
	case ClassSystem:
		return "system"
	case ClassReclaim:
		return "reclaim"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// diskMonitor holds the last sample of the file system's used fraction.
type diskMonitor struct {
	usage     atomic.Uint64 // math.Float64bits of the used fraction
	sampledAt atomic.Int64  // unix nanoseconds of the last good sample
	// sampledLog is the CommitLog's Written at the last sample.
	sampledLog atomic.Int64
	// systemUsage (math.Float64bits) is the used fraction the system
	// ceiling is held against: the sample less the CommitLog's room
	// allocated ahead (kept for exactly those records, so using it takes
	// nothing more from the disk).
	systemUsage atomic.Uint64
	failure     atomic.Pointer[string]
}

// sampleDisk measures the used fraction of the data directory's file
// system and records it for the ceilings. A failed statfs keeps the last
// sample (and is reported by DiskStatus).
func (s *Store) sampleDisk() (float64, error) {
	if s.commitLog != nil {
		s.disk.sampledLog.Store(s.commitLog.Written())
	}
	u, err := s.opts.DiskUsage(s.opts.Dir)
	if err != nil {
		msg := err.Error()
		s.disk.failure.Store(&msg)
		return math.Float64frombits(s.disk.usage.Load()), err
	}
	s.disk.failure.Store(nil)
	s.disk.usage.Store(math.Float64bits(u))
	su := u
	if s.commitLog != nil {
		if total, err := fileutil.DiskBytes(s.opts.Dir); err == nil && total > 0 {
			room, _ := s.commitLog.Room()
			su = max(0, u-float64(room)/float64(total))
		}
	}
	s.disk.systemUsage.Store(math.Float64bits(su))
	s.disk.sampledAt.Store(time.Now().UnixNano())
	return u, nil
}

// diskUsage is the last sampled used fraction.
func (s *Store) diskUsage() float64 { return math.Float64frombits(s.disk.usage.Load()) }

// systemUsage is the last sampled used fraction less the CommitLog's
// room allocated ahead: what the system ceiling is held against.
func (s *Store) systemUsage() float64 { return math.Float64frombits(s.disk.systemUsage.Load()) }

// checkCeiling refuses an append of class when the last sample is above
// its ceiling, and says how it may use the CommitLog's room: producers'
// messages keep the reserve, every other class may use it.
func (s *Store) checkCeiling(class Class) (commitlog.Use, error) {
	if class == ClassReclaim {
		return commitlog.UseReserve, nil
	}
	if last := s.disk.sampledLog.Load(); s.commitLog.Written()-last >= diskResampleBytes &&
		s.disk.sampledLog.CompareAndSwap(last, s.commitLog.Written()) {
		_, _ = s.sampleDisk() // a failure keeps the last sample and is reported by DiskStatus
	}
	u, ceiling, use := s.diskUsage(), s.opts.DiskSendCeiling, commitlog.KeepReserve
	if class == ClassSystem {
		u, ceiling, use = s.systemUsage(), s.opts.DiskSystemCeiling, commitlog.UseReserve
	}
	if u > ceiling {
		return 0, fmt.Errorf("%w: the file system of %s is %.1f%% used, above the %s ceiling of %.1f%%",
			ErrDiskFull, s.opts.Dir, 100*u, class, 100*ceiling)
	}
	return use, nil
}

// DiskStatus is the store's view of its file system.
type DiskStatus struct {
	// Usage is the used fraction (0..1) at SampledAt.
	Usage     float64
	SampledAt time.Time
	// SampleError is why the last sample failed ("" when it did not; the
	// ceilings then use the previous sample).
	SampleError string
	// CleanRatio, SendCeiling and SystemCeiling are the configured
	// thresholds (DiskMaxUsedRatio, DiskSendCeiling, DiskSystemCeiling).
	CleanRatio, SendCeiling, SystemCeiling float64
	// PressureDelete is DiskPressureDelete.
	PressureDelete bool
	// SendsRefused and SystemRefused report whether sends, and the
	// broker's own records, are refused: Usage is above the send (system)
	// ceiling, or the last append of the class was refused for want of
	// room on the file system.
	SendsRefused, SystemRefused bool
	// SystemRoom is the CommitLog room allocated ahead of the write
	// position that the broker's own records may still use (the rest of
	// the active segment's allocated blocks and the next segment's
	// reserve), in bytes.
	SystemRoom int64
	// NoSpace counts appends refused because the next CommitLog segment
	// could not be created (a full file system), since Open.
	NoSpace int64
}

// DiskStatus reports the last sample and the ceilings.
func (s *Store) DiskStatus() DiskStatus {
	u := s.diskUsage()
	room, noSpace := s.commitLog.Room()
	st := DiskStatus{
		Usage:          u,
		CleanRatio:     s.opts.DiskMaxUsedRatio,
		SendCeiling:    s.opts.DiskSendCeiling,
		SystemCeiling:  s.opts.DiskSystemCeiling,
		PressureDelete: s.opts.DiskPressureDelete,
		SendsRefused:   u > s.opts.DiskSendCeiling || noSpace[commitlog.KeepReserve] || noSpace[commitlog.UseReserve],
		SystemRefused:  s.systemUsage() > s.opts.DiskSystemCeiling || noSpace[commitlog.UseReserve],
		SystemRoom:     room,
		NoSpace:        s.commitLog.Stats().AllocFailures,
	}
	if at := s.disk.sampledAt.Load(); at != 0 {
		st.SampledAt = time.Unix(0, at)
	}
	if f := s.disk.failure.Load(); f != nil {
		st.SampleError = *f
	}
	return st
}
