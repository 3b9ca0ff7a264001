package broker_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// BenchmarkPullScan measures how fast pulls get through a backlog: each
// iteration is a new group that pulls (32 at a time, no wait, no acks)
// until it got the last message of a 10 000-message queue, which every
// variant's filter lets through. msgs/s is messages of the backlog passed
// per second, delivered or filtered out. Variants, in one run: no filter
// (every message delivered), an SQL filter that matches all of them, one
// of 10 % by SQL, 10 % by tag (the store skips on the ConsumeQueue's tag
// hash without reading the record), and an SQL filter that matches none.
//
//	go test -run '^$' -bench BenchmarkPullScan -benchtime 20x ./server/broker/
func BenchmarkPullScan(b *testing.B) {
	const n = 10_000
	ctx := context.Background()
	bk := brokertest.MustOpen(b, b.TempDir())
	if _, _, err := bk.PutTopic(ctx, broker.TopicConfig{Name: "scan", Queues: 1}); err != nil {
		b.Fatal(err)
	}
	msgs := make([]broker.SendMessage, n)
	for i := range msgs {
		msgs[i] = broker.SendMessage{Body: make([]byte, 256), Tag: fmt.Sprintf("b%d", i%10),
			Properties: map[string]string{"bucket": fmt.Sprint(i % 10), "region": []string{"eu", "us"}[i%2], "amount": fmt.Sprint(i)}}
	}
	msgs[n-1] = broker.SendMessage{Body: make([]byte, 256), Tag: "b3",
		Properties: map[string]string{"bucket": "99", "region": "none", "amount": "0", "last": "yes"}}
	for start := 0; start < n; start += broker.MaxSendBatch {
		if _, err := bk.Send(ctx, "scan", msgs[start:min(start+broker.MaxSendBatch, n)]); err != nil {
			b.Fatal(err)
		}
	}
	// One pass first, so that no variant pays for the first reads of the
	// segments (page faults of the mapping).
	for got := 0; got < n; {
		msgs, err := bk.Pull(ctx, broker.PullRequest{Group: "warm-up", Topic: "scan", MaxMessages: 32})
		if err != nil {
			b.Fatal(err)
		}
		got += len(msgs)
	}
	if err := bk.DeleteGroup(ctx, "warm-up"); err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		name string
		sub  broker.Subscription
		want int
	}{
		{"none", broker.Subscription{Topic: "scan"}, n},
		{"sql-all", broker.Subscription{Topic: "scan", SQL: "amount >= 0 AND region IN ('eu', 'us') OR last = 'yes'"}, n},
		{"sql-10pct", broker.Subscription{Topic: "scan", SQL: "bucket = 3 AND region = 'us' OR last = 'yes'"}, n/10 + 1},
		{"tag-10pct", broker.Subscription{Topic: "scan", TagExpression: "b3"}, n/10 + 1},
		{"sql-0pct", broker.Subscription{Topic: "scan", SQL: "bucket = 3 AND region = 'eu' OR last = 'yes'"}, 1},
	} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				group := fmt.Sprintf("%s-%d", v.name, i)
				if _, _, err := bk.PutGroup(ctx, broker.GroupConfig{Name: group, Subscriptions: []broker.Subscription{v.sub}}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for got := 0; got < v.want; {
					msgs, err := bk.Pull(ctx, broker.PullRequest{Group: group, Topic: "scan", MaxMessages: 32})
					if err != nil {
						b.Fatal(err)
					}
					got += len(msgs)
					if got > v.want {
						b.Fatalf("%s: %d messages delivered, want %d", v.name, got, v.want)
					}
				}
				b.StopTimer()
				if err := bk.DeleteGroup(ctx, group); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
