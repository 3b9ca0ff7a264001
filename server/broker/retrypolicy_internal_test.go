package broker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// The glue of package retry: its errors are invalid arguments, word for
// word as before the package existed, and the ladder is the broker's.
func TestRetryPolicyGlue(t *testing.T) {
	_, err := normalizeRetryPolicy(&RetryPolicy{Backoff: "linear", Initial: ms})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.EqualError(t, err, `invalid argument: retryPolicy.backoff "linear" must be "levels", "exponential" or "fixed"`)
	err = checkNackDelay(2, 3, ms)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.EqualError(t, err, "invalid argument: items[2]: give delayLevel or delayMs, not both")
	require.ErrorIs(t, checkNackDelay(0, 0, MaxRetryDelay+ms), ErrInvalidArgument)
	require.NoError(t, checkNackDelay(0, 0, MaxRetryDelay))

	b := &Broker{opts: Options{DelayLevels: DefaultDelayLevels[:5]}}
	level, delay := b.retryWait(nil, 40, 0, 0)
	require.Equal(t, 5, level, "capped at the broker's last level")
	require.Zero(t, delay)
}

func TestNormalizeConsumeFrom(t *testing.T) {
	for in, want := range map[string]string{
		"":                            "",
		"first":                       "",
		"last":                        "last",
		"2026-01-02T03:04:05Z":        "2026-01-02T03:04:05Z",
		"2026-01-02T05:04:05.5+02:00": "2026-01-02T03:04:05.5Z",
	} {
		got, err := normalizeConsumeFrom(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"LAST", "latest", "2026-01-02", "yesterday", " last"} {
		_, err := normalizeConsumeFrom(in)
		require.ErrorIs(t, err, ErrInvalidArgument, in)
		require.Contains(t, err.Error(), "consumeFrom", in)
	}
}

// FuzzGroupRetrySettings feeds arbitrary consumeFrom values and retry
// policies (as a group request carries them) to their validation: none
// panics, what is accepted normalizes to itself again, and every delay an
// accepted policy yields, at any attempt and any random draw, lies in
// [1 ms, MaxRetryDelay] and within ±jitter of its unjittered delay.
func FuzzGroupRetrySettings(f *testing.F) {
	f.Add("last", "exponential", int64(200), int64(1000), 0.5, int32(3), 0.9)
	f.Add("2026-01-01T00:00:00Z", "fixed", int64(1), int64(0), 1.0, int32(0), 0.0)
	f.Add("first", "levels", int64(0), int64(0), 0.0, int32(100), 0.5)
	f.Add("", "exponential", int64(7_200_000), int64(7_200_000), 0.0, int32(1<<30), 0.99)
	f.Add("2026-01-01T00:00:00.123456789+14:00", "", int64(-1), int64(-1), -1.0, int32(-5), 2.0)
	f.Fuzz(func(t *testing.T, consumeFrom, backoff string, initialMs, maxMs int64, jitter float64, reconsume int32, draw float64) {
		if v, err := normalizeConsumeFrom(consumeFrom); err == nil {
			again, err := normalizeConsumeFrom(v)
			require.NoError(t, err)
			require.Equal(t, v, again)
		} else {
			require.ErrorIs(t, err, ErrInvalidArgument)
		}
		if initialMs > 1<<40 || initialMs < -(1<<40) || maxMs > 1<<40 || maxMs < -(1<<40) {
			return // the API refuses these before they become durations
		}
		in := &RetryPolicy{Backoff: backoff, Initial: time.Duration(initialMs) * ms, Max: time.Duration(maxMs) * ms, Jitter: jitter}
		p, err := normalizeRetryPolicy(in)
		if err != nil {
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.Contains(t, err.Error(), "retryPolicy.")
			return
		}
		if p == nil {
			return // the ladder
		}
		again, err := normalizeRetryPolicy(p)
		require.NoError(t, err)
		require.Equal(t, p, again)
		unit := func() float64 { return min(max(draw, 0), 1-1e-12) }
		plain := *p
		plain.Jitter = 0
		base := plain.Delay(reconsume, unit)
		d := p.Delay(reconsume, unit)
		require.GreaterOrEqual(t, d, ms)
		require.LessOrEqual(t, d, MaxRetryDelay)
		require.LessOrEqual(t, base, p.Max)
		spread := time.Duration(float64(base)*p.Jitter) + time.Microsecond
		if d > ms && d < MaxRetryDelay {
			require.InDelta(t, float64(base), float64(d), float64(spread))
		}
	})
}
