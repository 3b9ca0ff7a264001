package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// TestCellShowsWhatPointersPointTo: a table cell shows the value behind a
// pointer of any kind (the generated client's optional fields), "-" for a
// nil one, never an address.
func TestCellShowsWhatPointersPointTo(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	status := mqgate.DeadLetterStatus("dead")
	for _, tc := range []struct {
		in   any
		want string
	}{
		{mqgate.Ptr(7), "7"},
		{mqgate.Ptr(int32(-3)), "-3"},
		{mqgate.Ptr(int64(1) << 40), "1099511627776"},
		{mqgate.Ptr(uint16(9)), "9"},
		{mqgate.Ptr(2.5), "2.5"},
		{mqgate.Ptr(float32(0.25)), "0.25"},
		{mqgate.Ptr(true), "yes"},
		{mqgate.Ptr("x"), "x"},
		{mqgate.Ptr(""), "-"},
		{&at, "2026-01-02T03:04:05.006Z"},
		{&status, "dead"},
		{mqgate.Ptr(mqgate.Ptr(5)), "5"},
		{(*int)(nil), "-"},
		{(*time.Time)(nil), "-"},
		{(*mqgate.DeadLetterStatus)(nil), "-"},
		{mqgate.Ptr([]string{"a", "b"}), "a,b"},
		{[]int{1, 2}, "1,2"},
		{[]string{}, "-"},
		{map[string]string{"b": "2", "a": "1"}, "a=1,b=2"},
		{map[string]int{"n": 1}, "n=1"},
		{time.Time{}, "-"},
		{nil, "-"},
		{42, "42"},
	} {
		require.Equal(t, tc.want, cell(tc.in), "%T %v", tc.in, tc.in)
	}
}
