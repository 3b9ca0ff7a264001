package commitlog

import (
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// xorAt damages one byte of the file at path in place (the log may have it
// mapped: MAP_SHARED pages see the write at once, as they would see a bad
// sector re-read or a stray write).
func xorAt(t *testing.T, path string, off int64, mask byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= mask
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// damageRecord flips a bit in the middle of record r's frame (in its
// payload when it has one, else in its stored offset) on disk.
func damageRecord(t *testing.T, l *Log, r AppendResult, at int64) {
	t.Helper()
	path, base := segmentPath(t, l, r.Offset)
	xorAt(t, path, r.Offset-base+at, 0x10)
}

// TestReadRefusesDamagedRecord: a record whose payload changed after it
// was written is never returned, by Read or by Next; Next passes over it
// (its header is intact) and the records after it read as before.
func TestReadRefusesDamagedRecord(t *testing.T) {
	forEachConfig(t, func(t *testing.T, segSize int64, mode FlushMode) {
		l := mustOpen(t, testOptions(t, segSize, mode))
		rng := rand.New(rand.NewPCG(7, uint64(segSize)))
		var w written
		for len(w.results) < 12 {
			p := randomPayload(rng, 1+rng.IntN(maxTestPayload(segSize)))
			res, err := l.Append(bytesPayload(p))
			require.NoError(t, err)
			w.payloads, w.results = append(w.payloads, p), append(w.results, res)
		}
		require.NoError(t, l.Flush())
		bad := w.results[5]
		damageRecord(t, l, bad, HeaderSize+int64(len(w.payloads[5]))/2)

		rec, err := l.Read(bad.Offset, nil)
		require.ErrorIs(t, err, ErrChecksum)
		require.ErrorIs(t, err, ErrCorrupt)
		require.Contains(t, err.Error(), "CRC-32C mismatch")
		require.Equal(t, bad.Offset, rec.Offset)
		require.Equal(t, bad.Size, rec.Size)
		require.Nil(t, rec.Payload)

		// Following the log: the damaged record is reported with its
		// extent, and the walk goes on after it.
		off := int64(0)
		var got []int64
		for {
			rec, next, err := l.Next(off, nil)
			if err != nil && !errors.Is(err, ErrChecksum) {
				require.ErrorIs(t, err, ErrNoData)
				break
			}
			if err != nil {
				require.Equal(t, bad.Offset, rec.Offset)
				require.Equal(t, bad.end(), next)
			} else {
				got = append(got, rec.Offset)
			}
			off = next
		}
		require.Len(t, got, len(w.results)-1)
		for i, r := range w.results {
			if i == 5 {
				continue
			}
			rec, err := l.Read(r.Offset, nil)
			require.NoError(t, err, "record %d", i)
			requirePayload(t, w.payloads[i], rec.Payload, "record %d", i)
		}
	})
}

// TestNextStopsAtDamagedHeader: past a header that is garbage the next
// frame's position is unknown, so Next reports it and does not move.
func TestNextStopsAtDamagedHeader(t *testing.T) {
	t.Parallel()
	l := mustOpen(t, testOptions(t, 64<<10, FlushSync))
	var res []AppendResult
	for range 5 {
		r, err := l.Append(bytesPayload([]byte("some payload bytes")))
		require.NoError(t, err)
		res = append(res, r)
	}
	damageRecord(t, l, res[2], magicFieldOffset+1)
	_, err := l.Read(res[2].Offset, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotErrorIs(t, err, ErrChecksum)
	_, next, err := l.Next(res[2].Offset, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.NotErrorIs(t, err, ErrChecksum)
	require.Equal(t, res[2].Offset, next)
}

// scrubAll runs Scrub from the log's start with budget until a pass is
// done and returns the combined result.
func scrubAll(t *testing.T, l *Log, budget int64) ScrubResult {
	t.Helper()
	total := ScrubResult{From: l.MinOffset()}
	pos := total.From
	for calls := 0; ; calls++ {
		require.Less(t, calls, 100000, "scrub makes no progress")
		r, err := l.Scrub(pos, budget)
		require.NoError(t, err)
		require.GreaterOrEqual(t, r.Next, pos)
		total.Bytes += r.Bytes
		total.Records += r.Records
		total.Bad = append(total.Bad, r.Bad...)
		pos = r.Next
		if r.Done {
			total.Next, total.Done = pos, true
			return total
		}
		require.Positive(t, r.Bytes, "an unfinished call examines something")
	}
}

// TestScrubFindsDamageInEverySegment: the scrubber walks every sealed
// segment and the durable part of the active one at the budget it is
// given, reports a damaged payload with its extent and a damaged header
// with the rest of its segment (of the active segment: up to the flushed
// offset), and stops at the flushed offset.
func TestScrubFindsDamageInEverySegment(t *testing.T) {
	t.Parallel()
	const segSize = 4 << 10
	l := mustOpen(t, testOptions(t, segSize, FlushSync))
	var res []AppendResult
	for len(l.Segments()) < 6 {
		r, err := l.Append(bytesPayload(make([]byte, 200+len(res)%7*50)))
		require.NoError(t, err)
		res = append(res, r)
	}
	for range 3 { // a few records in the active segment
		r, err := l.Append(bytesPayload(make([]byte, 200)))
		require.NoError(t, err)
		res = append(res, r)
	}
	segs := l.Segments()
	end := l.Flushed()
	require.Greater(t, end, segs[len(segs)-1].Base, "the active segment holds durable records")
	inSegment := func(i int) []AppendResult {
		var out []AppendResult
		for _, r := range res {
			if r.Offset >= segs[i].Base && r.Offset < segs[i].Base+segs[i].Size {
				out = append(out, r)
			}
		}
		return out
	}
	clean := scrubAll(t, l, 1000)
	require.Empty(t, clean.Bad)
	require.Equal(t, end, clean.Next)
	require.Equal(t, end, clean.Bytes, "every durable byte")
	require.Equal(t, int64(len(res)), clean.Records)

	body := inSegment(1)[2]
	damageRecord(t, l, body, HeaderSize+100)
	header := inSegment(3)[1]
	damageRecord(t, l, header, sizeFieldOffset+1) // size now points nowhere valid
	last := len(segs) - 1
	activeBody := inSegment(last)[0]
	damageRecord(t, l, activeBody, HeaderSize+10)
	activeHeader := inSegment(last)[1]
	damageRecord(t, l, activeHeader, magicFieldOffset+1)

	for _, budget := range []int64{1, 300, 5000, 1 << 30} {
		got := scrubAll(t, l, budget)
		require.Len(t, got.Bad, 4, "budget %d", budget)
		require.Equal(t, body.Offset, got.Bad[0].Offset)
		require.Equal(t, body.Size, got.Bad[0].Size)
		require.Zero(t, got.Bad[0].Unverified)
		require.ErrorIs(t, got.Bad[0].Err, ErrChecksum)
		require.Equal(t, header.Offset, got.Bad[1].Offset)
		require.Zero(t, got.Bad[1].Size)
		require.Equal(t, segs[3].Base+segs[3].Size-header.Offset, got.Bad[1].Unverified)
		require.ErrorIs(t, got.Bad[1].Err, ErrCorrupt)
		require.NotErrorIs(t, got.Bad[1].Err, ErrChecksum)
		require.Equal(t, activeBody.Offset, got.Bad[2].Offset)
		require.ErrorIs(t, got.Bad[2].Err, ErrChecksum)
		require.Equal(t, activeHeader.Offset, got.Bad[3].Offset)
		require.Equal(t, end-activeHeader.Offset, got.Bad[3].Unverified, "up to the flushed offset")
		require.ErrorIs(t, got.Bad[3].Err, ErrCorrupt)
		require.Equal(t, end, got.Next)
		require.Equal(t, int64(len(res)-1-len(inSegment(3))+1-len(inSegment(last))), got.Records, "budget %d", budget)
	}
}

// TestScrubBudget: one call examines about its budget (whole frames).
func TestScrubBudget(t *testing.T) {
	t.Parallel()
	l := mustOpen(t, testOptions(t, 64<<10, FlushAsync))
	for len(l.Segments()) < 3 {
		_, err := l.Append(bytesPayload(make([]byte, 1000)))
		require.NoError(t, err)
	}
	require.NoError(t, l.Flush()) // the scrubber verifies durable data
	r, err := l.Scrub(0, 10_000)
	require.NoError(t, err)
	require.False(t, r.Done)
	require.GreaterOrEqual(t, r.Bytes, int64(10_000))
	require.Less(t, r.Bytes, int64(10_000+1000+HeaderSize))
	require.Equal(t, r.Bytes, r.Next)
}

// TestScrubAfterRetention: a position whose segment was deleted restarts
// at the oldest retained one.
func TestScrubAfterRetention(t *testing.T) {
	t.Parallel()
	l := mustOpen(t, testOptions(t, 4<<10, FlushSync))
	for len(l.Segments()) < 5 {
		_, err := l.Append(bytesPayload(make([]byte, 500)))
		require.NoError(t, err)
	}
	segs := l.Segments()
	_, err := l.DeleteSegmentsBelow(segs[2].Base)
	require.NoError(t, err)
	r, err := l.Scrub(segs[0].Base+100, 1<<30)
	require.NoError(t, err)
	require.Equal(t, segs[2].Base, r.From)
	require.True(t, r.Done)
	require.Equal(t, l.Flushed(), r.Next)
	require.Empty(t, r.Bad)
}

// TestScrubReportsFault: a sealed segment file cut short behind the log's
// back makes reads of its mapping fault (SIGBUS); the scrubber reports the
// fault instead of crashing and goes on with the next segment.
func TestScrubReportsFault(t *testing.T) {
	t.Parallel()
	const segSize = 16 << 10
	l := mustOpen(t, testOptions(t, segSize, FlushSync))
	for len(l.Segments()) < 4 {
		_, err := l.Append(bytesPayload(make([]byte, 900)))
		require.NoError(t, err)
	}
	segs := l.Segments()
	path, _ := segmentPath(t, l, segs[1].Base)
	require.NoError(t, os.Truncate(path, 4096)) // pages past 4 KiB now fault
	got := scrubAll(t, l, 1<<30)
	require.Len(t, got.Bad, 1)
	require.ErrorIs(t, got.Bad[0].Err, ErrFault)
	require.GreaterOrEqual(t, got.Bad[0].Offset, segs[1].Base+4096-1000)
	require.Equal(t, segs[1].Base+segSize-got.Bad[0].Offset, got.Bad[0].Unverified)
	require.Equal(t, l.Flushed(), got.Next, "the segments after it were scrubbed")
}
