package broker

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// The delays of each backoff without jitter: exponential doubles from
// initialMs up to maxMs, fixed stays at initialMs.
func TestRetryPolicyDelays(t *testing.T) {
	noJitter := func() float64 { panic("jitter drawn without jitter") }
	exp := &RetryPolicy{Backoff: BackoffExponential, Initial: 200 * ms, Max: 1000 * ms}
	var got []time.Duration
	for reconsume := int32(0); reconsume < 6; reconsume++ {
		got = append(got, exp.delay(reconsume, noJitter))
	}
	require.Equal(t, []time.Duration{200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms, 1000 * ms}, got)
	// Many attempts never overflow past the cap.
	require.Equal(t, 1000*ms, exp.delay(1<<30, noJitter))
	huge := &RetryPolicy{Backoff: BackoffExponential, Initial: MaxRetryDelay, Max: MaxRetryDelay}
	require.Equal(t, MaxRetryDelay, huge.delay(100, noJitter))

	fixed := &RetryPolicy{Backoff: BackoffFixed, Initial: 300 * ms, Max: MaxRetryDelay}
	for reconsume := int32(0); reconsume < 20; reconsume += 7 {
		require.Equal(t, 300*ms, fixed.delay(reconsume, noJitter))
	}
}

// Jitter spreads a delay over [d(1-j), d(1+j)]: the extremes of the
// random draw give the bounds, and real draws stay inside them and do
// spread.
func TestRetryPolicyJitterBounds(t *testing.T) {
	p := &RetryPolicy{Backoff: BackoffFixed, Initial: 1000 * ms, Max: MaxRetryDelay, Jitter: 0.25}
	require.Equal(t, 750*ms, p.delay(0, func() float64 { return 0 }))
	require.Equal(t, 1000*ms, p.delay(0, func() float64 { return 0.5 }))
	require.InDelta(t, float64(1250*ms), float64(p.delay(0, func() float64 { return 1 - 1e-12 })), float64(time.Microsecond))

	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 2000 {
		d := p.delay(3, rand.Float64)
		require.GreaterOrEqual(t, d, 750*ms)
		require.LessOrEqual(t, d, 1250*ms)
		lo, hi = min(lo, d), max(hi, d)
	}
	require.Less(t, lo, 800*ms, "the spread reaches down")
	require.Greater(t, hi, 1200*ms, "and up")

	// Full jitter never reaches 0, and the cap applies before the spread
	// but never lets a delay pass MaxRetryDelay.
	full := &RetryPolicy{Backoff: BackoffExponential, Initial: 100 * ms, Max: MaxRetryDelay, Jitter: 1}
	require.Equal(t, ms, full.delay(0, func() float64 { return 0 }))
	require.Equal(t, MaxRetryDelay, full.delay(40, func() float64 { return 1 - 1e-12 }))
	capped := &RetryPolicy{Backoff: BackoffExponential, Initial: 100 * ms, Max: 400 * ms, Jitter: 0.5}
	require.Equal(t, 200*ms, capped.delay(10, func() float64 { return 0 }))
}

// What waits how: an explicit level or delay wins over the policy; the
// default (no policy, or levels) is RocketMQ's ladder from level 3.
func TestRetryWaitPrecedence(t *testing.T) {
	b := &Broker{opts: Options{DelayLevels: DefaultDelayLevels}}
	exp := &RetryPolicy{Backoff: BackoffExponential, Initial: 200 * ms, Max: 10 * time.Second}
	for _, c := range []struct {
		name      string
		p         *RetryPolicy
		reconsume int32
		level     int
		delay     time.Duration
		wantLevel int
		wantDelay time.Duration
	}{
		{"ladder, first retry", nil, 0, 0, 0, 3, 0},
		{"ladder, later retry", nil, 4, 0, 0, 7, 0},
		{"ladder, capped at the last level", nil, 40, 0, 0, 18, 0},
		{"explicit levels policy", &RetryPolicy{Backoff: BackoffLevels}, 1, 0, 0, 4, 0},
		{"policy", exp, 2, 0, 0, 0, 800 * ms},
		{"nack level over the policy", exp, 2, 5, 0, 5, 0},
		{"nack level over the ladder's end", nil, 0, 99, 0, 18, 0},
		{"nack delay over the policy", exp, 2, 0, 1500 * ms, 0, 1500 * ms},
		{"nack delay over the ladder", nil, 0, 0, 1500 * ms, 0, 1500 * ms},
	} {
		level, delay := b.retryWait(c.p, c.reconsume, c.level, c.delay)
		require.Equal(t, c.wantLevel, level, c.name)
		require.Equal(t, c.wantDelay, delay, c.name)
	}
}

// Validation names the fields and fills in maxMs; a levels policy is
// stored as none.
func TestNormalizeRetryPolicy(t *testing.T) {
	for _, p := range []*RetryPolicy{nil, {}, {Backoff: BackoffLevels}} {
		got, err := normalizeRetryPolicy(p)
		require.NoError(t, err)
		require.Nil(t, got)
	}
	got, err := normalizeRetryPolicy(&RetryPolicy{Backoff: BackoffExponential, Initial: 200 * ms})
	require.NoError(t, err)
	require.Equal(t, &RetryPolicy{Backoff: BackoffExponential, Initial: 200 * ms, Max: MaxRetryDelay}, got)
	got, err = normalizeRetryPolicy(&RetryPolicy{Backoff: BackoffFixed, Initial: 200 * ms, Max: 200 * ms, Jitter: 1})
	require.NoError(t, err)
	require.Equal(t, &RetryPolicy{Backoff: BackoffFixed, Initial: 200 * ms, Max: 200 * ms, Jitter: 1}, got)

	for _, c := range []struct {
		p     RetryPolicy
		field string
	}{
		{RetryPolicy{Backoff: "linear", Initial: ms}, "retryPolicy.backoff"},
		{RetryPolicy{Backoff: "Exponential", Initial: ms}, "retryPolicy.backoff"},
		{RetryPolicy{Backoff: BackoffLevels, Initial: ms}, "retryPolicy.initialMs"},
		{RetryPolicy{Backoff: BackoffLevels, Jitter: 0.1}, "jitter"},
		{RetryPolicy{Backoff: BackoffExponential}, "retryPolicy.initialMs"},
		{RetryPolicy{Backoff: BackoffFixed, Initial: -ms}, "retryPolicy.initialMs"},
		{RetryPolicy{Backoff: BackoffFixed, Initial: MaxRetryDelay + ms}, "retryPolicy.initialMs"},
		{RetryPolicy{Backoff: BackoffExponential, Initial: 2 * ms, Max: ms}, "retryPolicy.maxMs"},
		{RetryPolicy{Backoff: BackoffExponential, Initial: ms, Max: MaxRetryDelay + ms}, "retryPolicy.maxMs"},
		{RetryPolicy{Backoff: BackoffExponential, Initial: ms, Jitter: 1.5}, "retryPolicy.jitter"},
		{RetryPolicy{Backoff: BackoffExponential, Initial: ms, Jitter: -0.1}, "retryPolicy.jitter"},
	} {
		_, err := normalizeRetryPolicy(&c.p)
		require.Error(t, err, "%+v", c.p)
		require.True(t, errors.Is(err, ErrInvalidArgument), "%+v: %v", c.p, err)
		require.Contains(t, err.Error(), c.field, "%+v", c.p)
	}
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
		base := plain.delay(reconsume, unit)
		d := p.delay(reconsume, unit)
		require.GreaterOrEqual(t, d, ms)
		require.LessOrEqual(t, d, MaxRetryDelay)
		require.LessOrEqual(t, base, p.Max)
		spread := time.Duration(float64(base)*p.Jitter) + time.Microsecond
		if d > ms && d < MaxRetryDelay {
			require.InDelta(t, float64(base), float64(d), float64(spread))
		}
	})
}
