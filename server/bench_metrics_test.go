package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// BenchmarkScrape measures one GET /metrics and one GET /v1/stats of a
// server with 200 groups, each subscribed to a topic of its own with 4
// queues holding one unconsumed message per queue: the consumer lag and
// oldest-unconsumed-age gauges read every queue's offsets and one
// ConsumeQueue entry per lagging queue at scrape time. Compare with
// Health, a GET /livez of the same server.
//
//	go test -run '^$' -bench Scrape -benchtime 2s ./server/
func BenchmarkScrape(b *testing.B) {
	e := servertest.Start(b)
	const groups = 200
	for i := range groups {
		topic := fmt.Sprintf("t%d", i)
		servertest.Decode(b, e.JSON(b, http.MethodPut, "/v1/topics/"+topic, api.TopicRequest{Queues: 4}), http.StatusCreated, nil)
		servertest.Decode(b, e.JSON(b, http.MethodPut, fmt.Sprintf("/v1/groups/g%d", i), api.GroupRequest{Subscriptions: []api.Subscription{{Topic: topic}}}), http.StatusCreated, nil)
		for q := range 4 {
			e.Send(b, topic, api.SendMessage{Body: "x", ShardingKey: fmt.Sprint(q)})
		}
	}
	client := &http.Client{} // not the helpers' spec-checking one: what a scraper pays
	b.Cleanup(client.CloseIdleConnections)
	for _, path := range []struct{ name, path string }{{"Metrics", "/metrics"}, {"Stats", "/v1/stats"}, {"Health", "/livez"}} {
		b.Run(path.name, func(b *testing.B) {
			for b.Loop() {
				resp, err := client.Get(e.Base + path.path)
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d", path.path, resp.StatusCode)
				}
			}
		})
	}
}
