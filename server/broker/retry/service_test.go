package retry

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
	"github.com/mqgate/mqgate/storage/schedule"
)

// oneRecord is a Store holding one record per (topic, queue), at offset 0.
type oneRecord map[string]*message.Message

func (s oneRecord) ReadQueue(topic string, _ int32, off int64, _ int, _ func(int64) bool) (storage.ReadResult, error) {
	m, ok := s[topic]
	if !ok || off != 0 {
		return storage.ReadResult{Next: off}, nil
	}
	return storage.ReadResult{Messages: []*message.Message{m}, Next: 1}, nil
}

func (s oneRecord) MinOffset(string, int32) int64 { return 0 }

type sinkFunc func([]*message.Message) error

func (f sinkFunc) Deliver(ms []*message.Message) error { return f(ms) }

// newTestService is a Service over store for group "g" (retryMaxTimes 2,
// the ladder), its writes captured in *written, topic "gone" deleted
// with level 1's entries below offset 5 scheduled for it.
func newTestService(store Store, written *[]*message.Message, rec *offset.Record) *Service {
	var gate sync.RWMutex
	return New(Config{
		Store: store, Clock: clockwork.NewFakeClockAt(time.UnixMilli(1_700_000_000_000)),
		DelayLevels: []time.Duration{time.Second, 5 * time.Second, 10 * time.Second},
		Names: Names{RetryPrefix: "%RETRY%", DLQPrefix: "%DLQ%", TimerTopic: "rmq_sys_TIMER", DLQReason: "DLQ_REASON",
			TxnID: "TRAN_ID", OrderSeq: "ORDER_SEQ", Instance: "BROADCAST_INSTANCE"},
		MaxReasonBytes: 4, MaxClientBytes: 8,
		StoreError: func(err error) error { return err },
		Gate:       gate.RLocker(),
		Group:      func(name string) (string, int, *Policy) { return name, 2, nil },
		ScheduleFloor: func(topic string) ([]int64, bool) {
			return []int64{5}, topic == "gone"
		},
		Wait: func(p *Policy, reconsume int32, level int, delay time.Duration) (int, time.Duration) {
			return Wait(p, 3, reconsume, level, delay, func() float64 { return 0.5 })
		},
		Known:    func(string) bool { return true },
		Instance: func(string) string { return "" },
		AckEntry: func(k offset.Key, off int64) offset.Entry {
			return offset.Entry{Kind: offset.KindAck, Key: k, Offsets: []int64{off}}
		},
		Persist:   func(r offset.Record, ms []*message.Message) error { *rec, *written = r, ms; return nil },
		Deleted:   func(*message.Message) bool { return false },
		MessageID: func(*message.Message) string { return "ID" },
		Timer: func(m *message.Message, due time.Time) {
			m.SetProperty(message.PropertyRealTopic, m.Topic)
			m.Topic = "rmq_sys_TIMER"
			m.SetProperty(message.PropertyDeliverTimeMs, due.Format(time.RFC3339))
		},
		FormatDue:    func(due time.Time) string { return due.Format(time.RFC3339) },
		Retried:      func(string, int) {},
		DeadLettered: func(string) {},
		Nudge:        func() {},
	})
}

func TestWriteCopies(t *testing.T) {
	m := &message.Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{"TRAN_ID": "tx", message.PropertyShardingKey: "s"}}
	var written []*message.Message
	var rec offset.Record
	s := newTestService(oneRecord{"t": m}, &written, &rec)
	key := offset.Key{Group: "g", Topic: "t", QueueID: 0}
	for _, tc := range []struct {
		f     Failure
		topic string
		check func(c *message.Message) bool
	}{
		// The ladder: level 3 + reconsume.
		{Failure{Key: key, StoreTopic: "t", Outcome: OutcomeNack}, message.ScheduleTopic, func(c *message.Message) bool {
			return c.QueueID == 2 && c.Property(message.PropertyRealTopic) == "%RETRY%g" && c.Property(message.PropertyDelayLevel) == "3" &&
				c.Property("TRAN_ID") == "" && c.Property(message.PropertyOriginMessageID) == "ID" && c.ReconsumeTimes == 1
		}},
		// A delay: a timer to the retry topic.
		{Failure{Key: key, StoreTopic: "t", Delay: time.Minute, Outcome: OutcomeNack}, "rmq_sys_TIMER", func(c *message.Message) bool {
			return c.Property(message.PropertyRealTopic) == "%RETRY%g" && c.Property(message.PropertyDeliverTimeMs) == time.UnixMilli(1_700_000_060_000).Format(time.RFC3339)
		}},
		// -1: dead, the reason cut, the sharded message's sequence.
		{Failure{Key: key, StoreTopic: "t", Level: -1, Reason: "long reason", Outcome: OutcomeNack}, "%DLQ%g", func(c *message.Message) bool {
			return c.Property("ORDER_SEQ") == "0" && len(c.Property("DLQ_REASON")) <= 4+len("… [truncated: 11 bytes]")
		}},
		// Used up: an ordered message's failures count.
		{Failure{Key: key, StoreTopic: "t", Failures: 2, History: []Attempt{{Outcome: OutcomeNack}}}, "%DLQ%g", func(c *message.Message) bool {
			return c.ReconsumeTimes == 3 && len(ParseAttempts(c.Property(PropAttempts))) == 1
		}},
	} {
		if err := s.Write("g", []Failure{tc.f}); err != nil {
			t.Fatal(err)
		}
		if len(written) != 1 || written[0].Topic != tc.topic || !tc.check(written[0]) {
			t.Fatalf("%+v: wrote %+v", tc.f, written)
		}
		if len(rec.Entries) != 1 || rec.Entries[0].Kind != offset.KindFailed {
			t.Fatalf("record %+v", rec)
		}
	}
	// A group deleted meanwhile: nothing is written, no copy to a topic
	// named by the bare prefix.
	gone := newTestService(oneRecord{"t": m}, &written, &rec)
	gone.cfg.Group = func(string) (string, int, *Policy) { return "", 0, nil }
	written, rec = nil, offset.Record{Entries: []offset.Entry{{}}}
	if err := gone.Write("g", []Failure{{Key: key, StoreTopic: "t", Outcome: OutcomeNack}}); err != nil || written != nil || len(rec.Entries) != 1 {
		t.Fatalf("a deleted group's failure: %v %+v %+v", err, written, rec)
	}
	// A message gone meanwhile: the failure ends, nothing is copied.
	if err := s.Write("g", []Failure{{Key: key, StoreTopic: "other"}}); err != nil || len(written) != 0 || len(rec.Entries) != 1 {
		t.Fatalf("%v %+v %+v", err, written, rec)
	}
}

func TestScheduleDrops(t *testing.T) {
	s := newTestService(oneRecord{}, new([]*message.Message), new(offset.Record))
	for _, tc := range []struct {
		key     string
		level   int
		off     int64
		wantErr bool
	}{{"sched:0:4", 1, 4, false}, {"sched:2:17", 3, 17, false}, {"sched:x:1", 0, 0, true}, {"timer:1", 0, 0, true}} {
		level, off, ok := ScheduleEntry(tc.key)
		if ok == tc.wantErr || (ok && (level != tc.level || off != tc.off)) {
			t.Errorf("%s: %d %d %v", tc.key, level, off, ok)
		}
	}
	retryOfGone := &message.Message{Topic: "%RETRY%g", Properties: map[string]string{message.PropertyRetryTopic: "gone", message.PropertyUniqKey: "sched:0:4"}}
	gone := &message.Message{Topic: "gone", Properties: map[string]string{message.PropertyUniqKey: "sched:0:5"}}
	kept := &message.Message{Topic: "t", Properties: map[string]string{message.PropertyUniqKey: "sched:0:1"}}
	var got []*message.Message
	sink := s.Sink(sinkFunc(func(ms []*message.Message) error { got = ms; return nil }))
	if err := sink.Deliver([]*message.Message{retryOfGone, gone, kept}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != gone || got[1] != kept {
		t.Fatalf("delivered %+v", got)
	}
	fail := errors.New("x")
	if err := s.Sink(sinkFunc(func([]*message.Message) error { return fail })).Deliver([]*message.Message{kept}); err != fail {
		t.Fatal(err)
	}
	// The ladder counts nothing of a scheduler with empty levels.
	counts := s.Counts(func() []schedule.LevelStatus { return make([]schedule.LevelStatus, 3) }, func(Dest) bool { return true })
	if len(counts) != 3 || !counts[0].Known || counts[0].Count != 0 {
		t.Fatalf("%+v", counts)
	}
}
