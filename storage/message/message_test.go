package message

import (
	"reflect"
	"testing"
)

// TestCopyTo: a copy carries the body, flag, born time and host, reconsume
// count and the properties not dropped, on its own topic, and shares no
// property map with the original; the store's fields are left to the
// store.
func TestCopyTo(t *testing.T) {
	m := &Message{Topic: "orders", QueueID: 3, QueueOffset: 9, PhysicalOffset: 77, Body: []byte("b"), Flag: 4,
		BornTimestamp: 1000, StoreTimestamp: 2000, BornHost: Host{10, 0, 0, 1, 0, 1}, StoreHost: Host{9}, ReconsumeTimes: 2}
	m.SetProperty("KEYS", "k")
	m.SetProperty("DROP", "x")
	c := m.CopyTo("%RETRY%g", "DROP")
	want := &Message{Topic: "%RETRY%g", Body: []byte("b"), Flag: 4, BornTimestamp: 1000, BornHost: Host{10, 0, 0, 1, 0, 1}, ReconsumeTimes: 2,
		Properties: map[string]string{"KEYS": "k"}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("CopyTo = %+v, want %+v", c, want)
	}
	c.SetProperty("KEYS", "changed")
	if m.Property("KEYS") != "k" {
		t.Fatal("the copy shares the original's properties")
	}
}
