// Package schedule is mqgate's delay-level scheduler (RocketMQ's
// ScheduleMessageService): messages waiting for a delay level live in the
// internal topic SCHEDULE_TOPIC_XXXX, queue level-1, with their destination
// in the REAL_TOPIC / REAL_QID properties and their due time (unix ms) in
// TIMER_DELIVER_MS, which the store also writes into the ConsumeQueue's
// tagsCode. One worker per level reads its queue from a saved offset;
// because every message of a level waits the same delay, each queue is in
// due-time order and the worker only ever looks at its head. Due messages
// are re-put to their real topic and queue with the delay cleared, then the
// level's offset advances.
//
// Durability: progress is saved (atomically, with a CRC) at least every
// Config.SaveInterval and at Stop, always after the re-puts it covers, so a
// crash can re-deliver what was in flight but never skips a message.
//
// # Progress file (part of the on-disk format; never change)
//
//	magic u32 0x4D514453 ("MQDS") | version u16 (1) | levels u16 (n)
//	| n × offset i64 | crc u32 (CRC-32C of everything before)
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultLevels is RocketMQ's messageDelayLevel.
const DefaultLevels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// MaxLevels caps the number of levels (queues of the schedule topic).
const MaxLevels = 64

// ParseLevels parses a space-separated list of delays such as DefaultLevels.
// Units: ms, s, m, h, d (RocketMQ's units plus ms for tests).
func ParseLevels(s string) ([]time.Duration, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > MaxLevels {
		return nil, fmt.Errorf("%w: want 1..%d levels, got %d", ErrBadLevels, MaxLevels, len(fields))
	}
	out := make([]time.Duration, len(fields))
	for i, f := range fields {
		d, err := parseDelay(f)
		if err != nil {
			return nil, fmt.Errorf("%w: level %d %q: %w", ErrBadLevels, i+1, f, err)
		}
		out[i] = d
	}
	return out, nil
}

func parseDelay(f string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(f, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n <= 0 || n > int64(365*24*time.Hour/u.unit) {
				return 0, fmt.Errorf("not a positive number of %s", u.suffix)
			}
			return time.Duration(n) * u.unit, nil
		}
	}
	return 0, errors.New("missing unit (ms, s, m, h, d)")
}

// FormatLevels is the inverse of ParseLevels.
func FormatLevels(levels []time.Duration) string {
	parts := make([]string, len(levels))
	for i, d := range levels {
		switch {
		case d%(time.Hour) == 0:
			parts[i] = fmt.Sprintf("%dh", d/time.Hour)
		case d%time.Minute == 0:
			parts[i] = fmt.Sprintf("%dm", d/time.Minute)
		case d%time.Second == 0:
			parts[i] = fmt.Sprintf("%ds", d/time.Second)
		default:
			parts[i] = fmt.Sprintf("%dms", d/time.Millisecond)
		}
	}
	return strings.Join(parts, " ")
}
