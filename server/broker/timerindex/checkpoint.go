package timerindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// Checkpoint layout. Part of the on-disk format; never change (see doc.go).
const (
	checkpointName    = "CHECKPOINT"
	checkpointMagic   = 0x4D515443 // "MQTC"
	checkpointVersion = 1
	checkpointHeader  = 16

	flagRecount = 1 << 0

	// maxTopicName bounds a topic name in the topic table.
	maxTopicName = 1<<16 - 1
)

// Mark names the last record applied from a queue: its seq (-1: none)
// and its CommitLog offset.
type Mark struct {
	Seq  int64
	Phys int64
}

// NoMark is the Mark of a queue nothing was applied from.
var NoMark = Mark{Seq: -1, Phys: -1}

// Position is how far the index has applied its two queues.
type Position struct {
	// Timers and Statuses are the next seq of the timer queue and of the
	// status queue not yet applied.
	Timers, Statuses int64
	// TimerMark and StatusMark name the last record applied from each.
	TimerMark, StatusMark Mark
}

// runMeta is a run as the checkpoint lists it.
type runMeta struct {
	id   uint64
	tier int
	n    int64
	head int64
	crc  uint32
}

// state is what a checkpoint holds.
type state struct {
	pos     Position
	recount bool
	nextRun uint64
	runs    []runMeta
	topics  []string
	counts  []int64 // pending per topic ordinal
	live    *liveSet
}

func (s *state) encode() []byte {
	body := make([]byte, 0, 256+s.live.bytes())
	for _, v := range []int64{s.pos.Timers, s.pos.Statuses, s.pos.TimerMark.Seq, s.pos.TimerMark.Phys, s.pos.StatusMark.Seq, s.pos.StatusMark.Phys} {
		body = binary.BigEndian.AppendUint64(body, uint64(v))
	}
	body = binary.BigEndian.AppendUint64(body, s.nextRun)
	body = binary.BigEndian.AppendUint32(body, uint32(len(s.runs)))
	for _, r := range s.runs {
		body = binary.BigEndian.AppendUint64(body, r.id)
		body = append(body, uint8(r.tier))
		body = binary.BigEndian.AppendUint64(body, uint64(r.n))
		body = binary.BigEndian.AppendUint64(body, uint64(r.head))
		body = binary.BigEndian.AppendUint32(body, r.crc)
	}
	body = binary.BigEndian.AppendUint32(body, uint32(len(s.topics)))
	for i, t := range s.topics {
		body = binary.BigEndian.AppendUint16(body, uint16(len(t)))
		body = append(body, t...)
		body = binary.BigEndian.AppendUint64(body, uint64(s.counts[i]))
	}
	body = s.live.encode(body)

	out := make([]byte, checkpointHeader, checkpointHeader+len(body))
	binary.BigEndian.PutUint32(out[0:], checkpointMagic)
	binary.BigEndian.PutUint16(out[4:], checkpointVersion)
	var flags uint16
	if s.recount {
		flags |= flagRecount
	}
	binary.BigEndian.PutUint16(out[6:], flags)
	binary.BigEndian.PutUint32(out[8:], uint32(len(body)))
	binary.BigEndian.PutUint32(out[12:], crc32.Checksum(body, castagnoli))
	return append(out, body...)
}

// decodeState parses a checkpoint file's bytes.
func decodeState(b []byte) (*state, error) {
	if len(b) < checkpointHeader {
		return nil, fmt.Errorf("%w: checkpoint of %d bytes", ErrCorrupt, len(b))
	}
	if m := binary.BigEndian.Uint32(b[0:]); m != checkpointMagic {
		return nil, fmt.Errorf("%w: checkpoint magic %#x", ErrCorrupt, m)
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != checkpointVersion {
		return nil, fmt.Errorf("%w: checkpoint version %d", ErrCorrupt, v)
	}
	flags := binary.BigEndian.Uint16(b[6:])
	body := b[checkpointHeader:]
	if n := binary.BigEndian.Uint32(b[8:]); int64(n) != int64(len(body)) {
		return nil, fmt.Errorf("%w: checkpoint body of %d bytes, header says %d", ErrCorrupt, len(body), n)
	}
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[12:]) {
		return nil, fmt.Errorf("%w: checkpoint crc", ErrCorrupt)
	}
	s := &state{recount: flags&flagRecount != 0}
	r := reader{b: body}
	s.pos.Timers, s.pos.Statuses = int64(r.u64()), int64(r.u64())
	s.pos.TimerMark = Mark{int64(r.u64()), int64(r.u64())}
	s.pos.StatusMark = Mark{int64(r.u64()), int64(r.u64())}
	s.nextRun = r.u64()
	nruns := int(r.u32())
	if r.err != nil || s.pos.Timers < 0 || s.pos.Statuses < 0 || nruns > len(r.b)/29 {
		return nil, fmt.Errorf("%w: checkpoint position or run count", ErrCorrupt)
	}
	seen := map[uint64]bool{}
	for i := 0; i < nruns; i++ {
		m := runMeta{id: r.u64(), tier: int(r.u8()), n: int64(r.u64()), head: int64(r.u64()), crc: r.u32()}
		if r.err != nil || m.n <= 0 || m.head < 0 || m.head > m.n || m.id >= s.nextRun || seen[m.id] {
			return nil, fmt.Errorf("%w: checkpoint run %d", ErrCorrupt, i)
		}
		seen[m.id] = true
		s.runs = append(s.runs, m)
	}
	ntopics := int(r.u32())
	if r.err != nil || ntopics > len(r.b)/10 {
		return nil, fmt.Errorf("%w: checkpoint topic count", ErrCorrupt)
	}
	for i := 0; i < ntopics; i++ {
		name := string(r.take(int(r.u16())))
		count := int64(r.u64())
		if r.err != nil || name == "" || count < 0 {
			return nil, fmt.Errorf("%w: checkpoint topic %d", ErrCorrupt, i)
		}
		s.topics = append(s.topics, name)
		s.counts = append(s.counts, count)
	}
	live, rest, err := decodeLiveSet(r.b)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the checkpoint's live set", ErrCorrupt, len(rest))
	}
	s.live = live
	return s, nil
}

// readState reads dir's checkpoint: ErrNotFound when there is none.
func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", ErrNotFound, dir)
	}
	if err != nil {
		return nil, err
	}
	s, err := decodeState(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", filepath.Join(dir, checkpointName), err)
	}
	return s, nil
}

// writeFileAtomic replaces path with data: a temporary file, fsync,
// rename, fsync of the directory (which also makes the renames of the run
// files written before durable).
func writeFileAtomic(path string, data []byte) error {
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
