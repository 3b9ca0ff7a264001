package send

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
)

var (
	errInvalid  = errors.New("invalid argument")
	errNotFound = errors.New("topic not found")
	errFull     = errors.New("disk full")
)

// memStore is a Store in memory: records by CommitLog offset, queue
// offsets per topic and queue; fail, when set, refuses the next writes.
type memStore struct {
	mu      sync.Mutex
	records []*message.Message
	next    map[string]int64
	fail    error
	clock   clockwork.Clock
}

func (s *memStore) Put(m *message.Message) (storage.PutResult, error) {
	res := make([]storage.PutResult, 1)
	err := s.PutBatch([]*message.Message{m}, res)
	return res[0], err
}

func (s *memStore) PutBatch(ms []*message.Message, res []storage.PutResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	if s.next == nil {
		s.next = map[string]int64{}
	}
	for i, m := range ms {
		q := fmt.Sprintf("%s/%d", m.Topic, m.QueueID)
		phys := int64(len(s.records))
		res[i] = storage.PutResult{ID: message.NewID(message.Host{1}, phys), PhysicalOffset: phys, QueueID: m.QueueID, QueueOffset: s.next[q]}
		s.next[q]++
		c := *m
		c.PhysicalOffset, c.QueueOffset, c.StoreHost = phys, res[i].QueueOffset, message.Host{1}
		c.StoreTimestamp = s.clock.Now().UnixMilli()
		s.records = append(s.records, &c)
	}
	return nil
}

// find is a FindDedup over the store: the newest record of topic with the
// dedup id, stored at since or later.
func (s *memStore) find(topic, id string, since int64) (*message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.records) - 1; i >= 0; i-- {
		m := s.records[i]
		if m.Topic == topic && m.Property(message.PropertyDedupID) == id && m.StoreTimestamp >= since {
			return m, nil
		}
	}
	return nil, storage.ErrNotFound
}

// newTestService is a Service over a memStore on a fake clock, topic "t"
// with 2 queues, auto-creation off.
func newTestService(t *testing.T) (*Service, *memStore, *clockwork.FakeClock, map[string]int) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_000))
	st := &memStore{clock: fc}
	sent := map[string]int{}
	var sentMu sync.Mutex
	var gate sync.RWMutex
	s := New(Config{
		Store: st, Clock: fc, MaxMessageSize: 64, DedupWindow: time.Minute, DelayLevels: []time.Duration{time.Second},
		Errors:     Errors{InvalidArgument: errInvalid, TopicNotFound: errNotFound, EmptyBody: errors.New("empty"), TooLarge: errors.New("too large"), IdempotencyInFlight: errors.New("in flight"), IdempotencyKeyReused: errors.New("reused")},
		StoreError: func(err error) error { return fmt.Errorf("mapped: %w", err) },
		Reserved:   func(name string) bool { return name == "R" },
		TopicName: func(name string) error {
			if name == "" {
				return errors.New("bad name")
			}
			return nil
		},
		Topic: func(name string) (registry.TopicConfig, bool) {
			return registry.TopicConfig{Name: name, Queues: 2, Perm: "rw"}, name == "t"
		},
		Gate:        gate.RLocker(),
		CheckTxn:    func(*Request) error { return nil },
		ReserveTxn:  func(string) (func(bool, int64), error) { return func(bool, int64) {}, nil },
		FindDedup:   st.find,
		TimerDue:    func(*Request, time.Time) (time.Time, error) { return time.Time{}, nil },
		CheckTimers: func(int) error { return nil },
		TimerSent:   func(*message.Message) int32 { return 0 },
		Sent: func(topic string, n, _ int) {
			sentMu.Lock()
			sent[topic] += n
			sentMu.Unlock()
		},
	})
	return s, st, fc, sent
}

func TestServiceSend(t *testing.T) {
	s, st, _, sent := newTestService(t)
	ctx := context.Background()
	res, err := s.Send(ctx, "t", []Request{{Body: []byte("a")}, {Body: []byte("b"), DelayLevel: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].QueueOffset != 0 || res[1].QueueOffset != -1 || res[1].QueueID != 0 || sent["t"] != 2 {
		t.Fatalf("%+v, sent %v", res, sent)
	}
	if m := st.records[1]; m.Topic != message.ScheduleTopic || m.Property(message.PropertyRealTopic) != "t" {
		t.Fatalf("delayed record %+v", m)
	}
	for _, tc := range []struct {
		topic string
		msgs  []Request
		want  string
	}{
		{"", []Request{{Body: []byte("a")}}, "bad name"},
		{"u", []Request{{Body: []byte("a")}}, "topic not found: u"},
		{"t", nil, "invalid argument: a send carries 1 to 256 messages, got 0"},
		{"t", []Request{{Body: []byte("a"), DelayLevel: 2}}, "invalid argument: delayLevel must be 1..1"},
		{"t", []Request{{Body: []byte("a"), Properties: map[string]string{"R": ""}}}, "invalid argument: property R is reserved for the broker"},
		{"t", []Request{{Body: make([]byte, 65)}}, "too large: body is 65 bytes; the limit is 64 bytes"},
	} {
		if _, err := s.Send(ctx, tc.topic, tc.msgs); err == nil || err.Error() != tc.want {
			t.Errorf("%q %+v: %v, want %s", tc.topic, tc.msgs, err, tc.want)
		}
	}
}

// TestServiceFailedWriteReleases: a write the store refuses releases the
// send's keys (the next send of one stores) and answers the store's
// error through StoreError; nothing is counted.
func TestServiceFailedWriteReleases(t *testing.T) {
	s, st, _, sent := newTestService(t)
	ctx := context.Background()
	st.fail = errFull
	_, err := s.Send(ctx, "t", []Request{{Body: []byte("a"), DedupID: "k"}, {Body: []byte("b"), DedupID: "l"}})
	if !errors.Is(err, errFull) || err.Error() != "mapped: disk full" {
		t.Fatal(err)
	}
	st.fail = nil
	res, err := s.Send(ctx, "t", []Request{{Body: []byte("a"), DedupID: "k"}})
	if err != nil || res[0].Duplicate || sent["t"] != 1 {
		t.Fatalf("%+v %v %v", res, err, sent)
	}
}

// TestServiceWindow: a settled key answers repeats from the table; once
// Expire let it go, from the store within the window; after the window,
// a new send. DropTopic forgets a topic's keys (the store still answers).
func TestServiceWindow(t *testing.T) {
	s, _, fc, _ := newTestService(t)
	ctx := context.Background()
	send := func(id string) Result {
		t.Helper()
		res, err := s.Send(ctx, "t", []Request{{Body: []byte("x"), DedupID: id}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	first := send("k")
	if again := send("k"); !again.Duplicate || again.MessageID != first.MessageID {
		t.Fatalf("%+v", again)
	}
	fc.Advance(30 * time.Second)
	s.Expire(fc.Now())
	s.DropTopic("t")
	if again := send("k"); !again.Duplicate || again.MessageID != first.MessageID {
		t.Fatalf("from the store: %+v", again)
	}
	fc.Advance(31 * time.Second)
	s.Expire(fc.Now())
	if later := send("k"); later.Duplicate {
		t.Fatalf("after the window: %+v", later)
	}
}

// TestServiceConcurrent: concurrent sends of a few keys (run under -race)
// store each key once.
func TestServiceConcurrent(t *testing.T) {
	s, st, _, _ := newTestService(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, _ = s.Send(ctx, "t", []Request{{Body: []byte("x"), DedupID: fmt.Sprint(i % 4)}})
		}(i)
	}
	wg.Wait()
	seen := map[string]int{}
	for _, m := range st.records {
		seen[m.Property(message.PropertyDedupID)]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("key %s stored %d times", id, n)
		}
	}
}
