package commitlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// TestModel drives a log with random appends, batches, clean reopens,
// crash images and retention, and compares it with a plain list of
// records after every step.
func TestModel(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		segSize := rapid.SampledFrom([]int64{128, 300, 1024}).Draw(rt, "segSize")
		mode := rapid.SampledFrom(flushModes).Draw(rt, "mode")
		dir := t.TempDir()
		opts := Options{Dir: dir, SegmentSize: segSize, FlushMode: mode}
		l, err := Open(opts)
		require.NoError(rt, err)
		defer func() { _ = l.Close() }()

		type rec struct {
			res     AppendResult
			payload []byte
		}
		var model []rec
		maxPayload := int(segSize) - 2*HeaderSize
		payloadGen := rapid.SliceOfN(rapid.Byte(), 0, maxPayload)

		check := func() {
			minOffset := l.MinOffset()
			off := minOffset
			for _, r := range model {
				if r.res.Offset < minOffset {
					_, err := l.Read(r.res.Offset, nil)
					require.ErrorIs(rt, err, ErrOffsetTooSmall)
					continue
				}
				got, next, err := l.Next(off, nil)
				require.NoError(rt, err)
				require.Equal(rt, r.res.Offset, got.Offset)
				require.True(rt, bytes.Equal(r.payload, got.Payload))
				off = next
			}
			_, _, err := l.Next(off, nil)
			require.True(rt, errors.Is(err, ErrNoData), "%v", err)
		}

		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3: // append
				p := payloadGen.Draw(rt, "payload")
				res, err := l.Append(bytesPayload(p))
				require.NoError(rt, err)
				model = append(model, rec{res, p})
			case 4: // batch
				n := rapid.IntRange(1, 4).Draw(rt, "batch")
				es, ps := make([]Encoder, n), make([][]byte, n)
				for i := range es {
					ps[i] = payloadGen.Draw(rt, "payload")
					es[i] = bytesPayload(ps[i])
				}
				res := make([]AppendResult, n)
				require.NoError(rt, l.AppendBatch(es, res))
				for i := range res {
					model = append(model, rec{res[i], ps[i]})
				}
			case 5, 6: // clean reopen from a random checkpoint
				require.NoError(rt, l.Close())
				o := opts
				o.HighWater = l.Written()
				if len(model) > 0 && rapid.Bool().Draw(rt, "checkpoint") {
					o.RecoverFrom = model[rapid.IntRange(0, len(model)-1).Draw(rt, "from")].res.Offset
				}
				l, err = Open(o)
				require.NoError(rt, err)
				require.False(rt, l.Recovery().Torn)
			case 7: // crash: continue on a copy of the files of a live log
				require.NoError(rt, l.Flush())
				image := t.TempDir()
				copyDir(t, opts.Dir, image)
				hw := l.Flushed()
				require.NoError(rt, l.Close())
				opts.Dir = image
				o := opts
				o.HighWater = hw
				l, err = Open(o)
				require.NoError(rt, err)
				require.False(rt, l.Recovery().Torn)
			case 8, 9: // retention
				if len(model) == 0 {
					continue
				}
				below := model[rapid.IntRange(0, len(model)-1).Draw(rt, "below")].res.Offset
				require.NoError(rt, l.Flush())
				before := l.MinOffset()
				_, err := l.DeleteSegmentsBelow(below)
				require.NoError(rt, err)
				require.LessOrEqual(rt, l.MinOffset(), max(before, below), "a segment holding data at or above the offset was deleted")
			}
			check()
		}
	})
}
