package retry

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// The delays of each backoff without jitter: exponential doubles from
// initialMs up to maxMs, fixed stays at initialMs.
func TestPolicyDelays(t *testing.T) {
	noJitter := func() float64 { panic("jitter drawn without jitter") }
	exp := &Policy{Backoff: BackoffExponential, Initial: 200 * ms, Max: 1000 * ms}
	var got []time.Duration
	for reconsume := int32(0); reconsume < 6; reconsume++ {
		got = append(got, exp.Delay(reconsume, noJitter))
	}
	require.Equal(t, []time.Duration{200 * ms, 400 * ms, 800 * ms, 1000 * ms, 1000 * ms, 1000 * ms}, got)
	// Many attempts never overflow past the cap.
	require.Equal(t, 1000*ms, exp.Delay(1<<30, noJitter))
	huge := &Policy{Backoff: BackoffExponential, Initial: MaxDelay, Max: MaxDelay}
	require.Equal(t, MaxDelay, huge.Delay(100, noJitter))

	fixed := &Policy{Backoff: BackoffFixed, Initial: 300 * ms, Max: MaxDelay}
	for reconsume := int32(0); reconsume < 20; reconsume += 7 {
		require.Equal(t, 300*ms, fixed.Delay(reconsume, noJitter))
	}
}

// Jitter spreads a delay over [d(1-j), d(1+j)]: the extremes of the
// random draw give the bounds, and real draws stay inside them and do
// spread.
func TestPolicyJitterBounds(t *testing.T) {
	p := &Policy{Backoff: BackoffFixed, Initial: 1000 * ms, Max: MaxDelay, Jitter: 0.25}
	require.Equal(t, 750*ms, p.Delay(0, func() float64 { return 0 }))
	require.Equal(t, 1000*ms, p.Delay(0, func() float64 { return 0.5 }))
	require.InDelta(t, float64(1250*ms), float64(p.Delay(0, func() float64 { return 1 - 1e-12 })), float64(time.Microsecond))

	lo, hi := time.Duration(1<<62), time.Duration(0)
	for range 2000 {
		d := p.Delay(3, rand.Float64)
		require.GreaterOrEqual(t, d, 750*ms)
		require.LessOrEqual(t, d, 1250*ms)
		lo, hi = min(lo, d), max(hi, d)
	}
	require.Less(t, lo, 800*ms, "the spread reaches down")
	require.Greater(t, hi, 1200*ms, "and up")

	// Full jitter never reaches 0, and the cap applies before the spread
	// but never lets a delay pass MaxDelay.
	full := &Policy{Backoff: BackoffExponential, Initial: 100 * ms, Max: MaxDelay, Jitter: 1}
	require.Equal(t, ms, full.Delay(0, func() float64 { return 0 }))
	require.Equal(t, MaxDelay, full.Delay(40, func() float64 { return 1 - 1e-12 }))
	capped := &Policy{Backoff: BackoffExponential, Initial: 100 * ms, Max: 400 * ms, Jitter: 0.5}
	require.Equal(t, 200*ms, capped.Delay(10, func() float64 { return 0 }))
}

// What waits how: an explicit level or delay wins over the policy; the
// default (no policy, or levels) is RocketMQ's ladder from level 3.
func TestWaitPrecedence(t *testing.T) {
	const levels = 18 // the default ladder, 1s … 2h
	exp := &Policy{Backoff: BackoffExponential, Initial: 200 * ms, Max: 10 * time.Second}
	for _, c := range []struct {
		name      string
		p         *Policy
		reconsume int32
		level     int
		delay     time.Duration
		wantLevel int
		wantDelay time.Duration
	}{
		{"ladder, first retry", nil, 0, 0, 0, 3, 0},
		{"ladder, later retry", nil, 4, 0, 0, 7, 0},
		{"ladder, capped at the last level", nil, 40, 0, 0, 18, 0},
		{"explicit levels policy", &Policy{Backoff: BackoffLevels}, 1, 0, 0, 4, 0},
		{"policy", exp, 2, 0, 0, 0, 800 * ms},
		{"nack level over the policy", exp, 2, 5, 0, 5, 0},
		{"nack level over the ladder's end", nil, 0, 99, 0, 18, 0},
		{"nack delay over the policy", exp, 2, 0, 1500 * ms, 0, 1500 * ms},
		{"nack delay over the ladder", nil, 0, 0, 1500 * ms, 0, 1500 * ms},
	} {
		level, delay := Wait(c.p, levels, c.reconsume, c.level, c.delay, func() float64 { return 0.5 })
		require.Equal(t, c.wantLevel, level, c.name)
		require.Equal(t, c.wantDelay, delay, c.name)
	}
}

// Validation names the fields and fills in maxMs; a levels policy is
// stored as none.
func TestNormalize(t *testing.T) {
	for _, p := range []*Policy{nil, {}, {Backoff: BackoffLevels}} {
		got, err := Normalize(p)
		require.NoError(t, err)
		require.Nil(t, got)
	}
	got, err := Normalize(&Policy{Backoff: BackoffExponential, Initial: 200 * ms})
	require.NoError(t, err)
	require.Equal(t, &Policy{Backoff: BackoffExponential, Initial: 200 * ms, Max: MaxDelay}, got)
	got, err = Normalize(&Policy{Backoff: BackoffFixed, Initial: 200 * ms, Max: 200 * ms, Jitter: 1})
	require.NoError(t, err)
	require.Equal(t, &Policy{Backoff: BackoffFixed, Initial: 200 * ms, Max: 200 * ms, Jitter: 1}, got)

	for _, c := range []struct {
		p     Policy
		field string
	}{
		{Policy{Backoff: "linear", Initial: ms}, "retryPolicy.backoff"},
		{Policy{Backoff: "Exponential", Initial: ms}, "retryPolicy.backoff"},
		{Policy{Backoff: BackoffLevels, Initial: ms}, "retryPolicy.initialMs"},
		{Policy{Backoff: BackoffLevels, Jitter: 0.1}, "jitter"},
		{Policy{Backoff: BackoffExponential}, "retryPolicy.initialMs"},
		{Policy{Backoff: BackoffFixed, Initial: -ms}, "retryPolicy.initialMs"},
		{Policy{Backoff: BackoffFixed, Initial: MaxDelay + ms}, "retryPolicy.initialMs"},
		{Policy{Backoff: BackoffExponential, Initial: 2 * ms, Max: ms}, "retryPolicy.maxMs"},
		{Policy{Backoff: BackoffExponential, Initial: ms, Max: MaxDelay + ms}, "retryPolicy.maxMs"},
		{Policy{Backoff: BackoffExponential, Initial: ms, Jitter: 1.5}, "retryPolicy.jitter"},
		{Policy{Backoff: BackoffExponential, Initial: ms, Jitter: -0.1}, "retryPolicy.jitter"},
	} {
		_, err := Normalize(&c.p)
		require.Error(t, err, "%+v", c.p)
		require.Contains(t, err.Error(), c.field, "%+v", c.p)
	}
}

// TestPolicyJSON: a group record holds its policy under the Go field
// names, durations in nanoseconds, Jitter left out when 0 (part of the
// on-disk format).
func TestPolicyJSON(t *testing.T) {
	b, err := json.Marshal(Policy{Backoff: BackoffExponential, Initial: 200 * ms, Max: MaxDelay, Jitter: 0.5})
	require.NoError(t, err)
	require.Equal(t, `{"Backoff":"exponential","Initial":200000000,"Max":7200000000000,"Jitter":0.5}`, string(b))
	b, err = json.Marshal(Policy{Backoff: BackoffFixed, Initial: ms, Max: ms})
	require.NoError(t, err)
	require.Equal(t, `{"Backoff":"fixed","Initial":1000000,"Max":1000000}`, string(b))
}
