package send

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func noneReserved(string) bool { return false }

func TestCheckKinds(t *testing.T) {
	for _, tc := range []struct {
		m     Message
		kind  error // nil: an invalid argument (not a LimitError)
		field string
	}{
		{Message{Tag: strings.Repeat("t", MaxTagBytes+1)}, ErrValueTooLong, "tag"},
		{Message{Keys: make([]string, MaxKeys+1)}, ErrValueTooLong, "keys"},
		{Message{Keys: []string{""}}, nil, ""},
		{Message{ShardingKey: "a\x00"}, nil, ""},
		{Message{DedupID: strings.Repeat("d", MaxDedupIDBytes+1)}, ErrValueTooLong, "dedupId"},
		{Message{Properties: map[string]string{"R": "v"}}, nil, ""},
		{Message{Properties: map[string]string{"p": strings.Repeat("v", MaxUserPropertiesBytes)}}, ErrPropertiesTooLarge, "properties"},
	} {
		err := Check(tc.m, func(name string) bool { return name == "R" })
		if err == nil {
			t.Fatalf("%+v: no error", tc.m)
		}
		var le *LimitError
		isLimit := errors.As(err, &le)
		if tc.kind == nil {
			if isLimit {
				t.Errorf("%+v: %v is a LimitError", tc.m, err)
			}
			continue
		}
		if !isLimit || !errors.Is(err, tc.kind) || le.Field != tc.field {
			t.Errorf("%+v: %v, want a LimitError of %s on %s", tc.m, err, tc.kind, tc.field)
		}
	}
	if err := Check(Message{Tag: "t", Keys: []string{"k"}, ShardingKey: "s k", DedupID: "d", Properties: map[string]string{"p": "v"}}, noneReserved); err != nil {
		t.Fatal(err)
	}
}

func TestPrefixField(t *testing.T) {
	err := PrefixField(Limit(ErrValueTooLong, "tag", 2, 1), "messages[3].")
	if got := err.Error(); got != "value too long: messages[3].tag is 2 bytes; the limit is 1 bytes" {
		t.Fatal(got)
	}
	other := errors.New("x")
	if err := PrefixField(other, "messages[3]."); err.Error() != "messages[3]: x" || !errors.Is(err, other) {
		t.Fatal(err)
	}
}

func TestQueues(t *testing.T) {
	for _, q := range []int{1, 2, 7, 16} {
		if got := ShardQueue("order-1", q); got < 0 || int(got) >= q || got != ShardQueue("order-1", q) {
			t.Errorf("ShardQueue(order-1, %d) = %d", q, got)
		}
	}
	if got := RoundRobin(1<<32-1, 3); got != 0 {
		t.Errorf("RoundRobin(max, 3) = %d", got)
	}
}

func TestTable(t *testing.T) {
	var d Table[string]
	d.Init()
	at := time.UnixMilli(1_700_000_000_000)
	k := Key{"t", "id"}
	d.Lock()
	if v, _ := d.Lookup(k, []byte("a"), at); v != Unknown {
		t.Fatalf("empty table: %v", v)
	}
	claims := []Claim[string]{d.Claim(k, []byte("a"), at, 4)}
	if v, _ := d.Lookup(k, []byte("a"), at.Add(time.Hour)); v != InFlight {
		t.Fatalf("a claim past the window: %v", v)
	}
	d.Unlock()
	d.Settle(claims, func(i int) string { return map[int]string{4: "r4"}[i] }, nil)
	d.Lock()
	if v, r := d.Lookup(k, []byte("a"), at); v != Repeat || r != "r4" {
		t.Fatalf("settled: %v %q", v, r)
	}
	if v, _ := d.Lookup(k, []byte("b"), at); v != Reused {
		t.Fatalf("other body: %v", v)
	}
	if v, _ := d.Lookup(k, []byte("a"), at.Add(time.Millisecond)); v != Unknown {
		t.Fatalf("past the window: %v", v)
	}
	if v, r := d.Found(k, []byte("a"), []byte("a"), at, "stored"); v != Repeat || r != "stored" {
		t.Fatalf("found: %v %q", v, r)
	}
	claims = []Claim[string]{d.Claim(Key{"t", "x"}, []byte("a"), at, 0)}
	d.Release(claims)
	if v, _ := d.Lookup(Key{"t", "x"}, []byte("a"), at); v != Unknown {
		t.Fatalf("released: %v", v)
	}
	claims = []Claim[string]{d.Claim(Key{"t", "y"}, []byte("a"), at, 0)}
	d.Unlock()
	d.Settle(claims, nil, errors.New("write failed"))
	d.Expire(at.Add(time.Millisecond))
	d.DropTopic("t")
	d.Lock()
	defer d.Unlock()
	if len(d.entries) != 0 {
		t.Fatalf("left: %v", d.entries)
	}
}
