package send

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheck: Check of a client's tag, keys, sharding key, dedup id and one
// property never panics, and what it accepts is within the limits and
// valid UTF-8; a refused value is a *LimitError exactly when it is over a
// limit of its size.
func FuzzCheck(f *testing.F) {
	f.Add("t", "k1 k2", "s", "d", "p", "v")
	f.Add("", "", "", "", "", "")
	f.Add("a||b", " ", "a\nb", "\xff", "R", "\xff")
	f.Add(strings.Repeat("t", MaxTagBytes+1), "", "", "", "p", strings.Repeat("v", MaxUserPropertiesBytes))
	f.Fuzz(func(t *testing.T, tag, keys, shard, dedup, name, value string) {
		m := Message{Tag: tag, ShardingKey: shard, DedupID: dedup, Properties: map[string]string{name: value}}
		if keys != "" {
			m.Keys = strings.Split(keys, " ")
		}
		err := Check(m, func(n string) bool { return n == "R" })
		var le *LimitError
		if errors.As(err, &le) {
			if le.Size <= le.Limit {
				t.Fatalf("%v: size within the limit", err)
			}
			return
		}
		if err != nil {
			return
		}
		if len(tag) > MaxTagBytes || len(shard) > MaxShardingKeyBytes || len(dedup) > MaxDedupIDBytes ||
			len(name) > MaxPropertyNameBytes || name == "" || name == "R" {
			t.Fatalf("accepted over a limit: %+v", m)
		}
		for _, s := range append([]string{tag, shard, dedup, name, value}, m.Keys...) {
			if !utf8.ValidString(s) {
				t.Fatalf("accepted invalid UTF-8: %q", s)
			}
		}
		if strings.Contains(tag, "||") || strings.ContainsAny(tag, " \t\n") {
			t.Fatalf("accepted tag %q", tag)
		}
	})
}
