package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
)

// BenchmarkHTTP measures the HTTP hot paths of a real server (server.Open:
// the real broker and store, --flush sync, on a temporary data dir) over
// real HTTP on loopback, from 8×GOMAXPROCS parallel clients with keep-alive
// connections, next to a bare net/http handler that reads the same request
// and writes a send-sized answer: compare each path's ns/op with
// Baseline's, so a regression shows as a ratio that the machine's speed
// does not change.
//
//	make bench-http
//	go test -run '^$' -bench HTTP -benchtime 2s ./server/
//
// SendSingle sends one 1 KiB message per request, SendBatch100 100 of
// them as JSON and SendBatch100Binary as a binary batch; Pull32 pulls 32 (a backlog is sent before the timer starts; what
// it pulls is acked in the background); Ack acks one receipt per request
// (pulled before the timer starts).
func BenchmarkHTTP(b *testing.B) {
	const bodySize = 1024
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	b.Cleanup(client.CloseIdleConnections)
	single := benchSendBody(1, bodySize)
	batch := benchSendBody(100, bodySize)

	b.Run("Baseline", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		answer := []byte(`{"results":[{"messageId":"7F00000100001F9000000000000004D2","queueId":0,"queueOffset":0}]}`)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
		}), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		b.Cleanup(func() { _ = srv.Close() })
		benchParallel(b, 1, func() { benchPost(b, client, "http://"+ln.Addr().String()+"/", single, nil) })
	})

	base := benchServer(b)
	send := base + "/v1/topics/bench/messages"
	benchPost(b, client, send, single, nil) // creates the topic

	b.Run("SendSingle", func(b *testing.B) {
		benchParallel(b, 1, func() { benchPost(b, client, send, single, nil) })
	})
	b.Run("SendBatch100", func(b *testing.B) {
		benchParallel(b, 100, func() { benchPost(b, client, send, batch, nil) })
	})
	bodies := make([][]byte, 100)
	for i := range bodies {
		bodies[i] = bytes.Repeat([]byte{'x'}, bodySize)
	}
	binaryBatch := api.AppendBatch(nil, bodies...)
	b.Run("SendBatch100Binary", func(b *testing.B) {
		benchParallel(b, 100, func() { benchPostType(b, client, send, api.ContentTypeBatch, binaryBatch, nil) })
	})

	b.Run("Pull32", func(b *testing.B) {
		// A topic of its own with enough messages for every pull, sent
		// before the timer starts.
		topic := fmt.Sprintf("pull%d", benchTopics.Add(1))
		benchFill(b, client, base, topic, b.N*32+32, bodySize)
		pull := base + "/v1/groups/bench/topics/" + topic + "/pull"
		req := []byte(`{"maxMessages":32,"invisibleMs":600000}`)
		// What is pulled is acked in the background, in requests of up to
		// 1024 receipts: leases left out would pile up and make every pull
		// slower (the broker looks at a queue's leases on each pull), so
		// ns/op would grow with b.N.
		toAck := make(chan []string, 64)
		var acker sync.WaitGroup
		for range 2 {
			acker.Add(1)
			go func() {
				defer acker.Done()
				var batch []string
				flush := func() {
					if len(batch) > 0 {
						body, _ := json.Marshal(map[string][]string{"receipts": batch})
						benchPost(b, client, base+"/v1/groups/bench/ack", body, nil)
						batch = batch[:0]
					}
				}
				for rs := range toAck {
					batch = append(batch, rs...)
					if len(batch) >= 1024-32 {
						flush()
					}
				}
				flush()
			}()
		}
		b.ResetTimer()
		benchParallel(b, 32, func() {
			var got struct {
				Messages []struct {
					Receipt string `json:"receipt"`
				} `json:"messages"`
			}
			benchPost(b, client, pull, req, &got)
			if len(got.Messages) == 0 {
				b.Error("pull returned nothing")
			}
			rs := make([]string, len(got.Messages))
			for i, m := range got.Messages {
				rs[i] = m.Receipt
			}
			toAck <- rs
		})
		b.StopTimer()
		close(toAck)
		acker.Wait()
	})

	b.Run("Ack", func(b *testing.B) {
		topic := fmt.Sprintf("ack%d", benchTopics.Add(1))
		benchFill(b, client, base, topic, b.N, bodySize)
		receipts := make(chan string, b.N)
		pull := base + "/v1/groups/bench/topics/" + topic + "/pull"
		for len(receipts) < b.N {
			var got struct {
				Messages []struct {
					Receipt string `json:"receipt"`
				} `json:"messages"`
			}
			benchPost(b, client, pull, []byte(`{"maxMessages":32,"invisibleMs":600000}`), &got)
			if len(got.Messages) == 0 {
				b.Fatalf("pulled %d of %d", len(receipts), b.N)
			}
			for _, m := range got.Messages {
				receipts <- m.Receipt
			}
		}
		ack := base + "/v1/groups/bench/ack"
		b.ResetTimer()
		benchParallel(b, 1, func() {
			body := []byte(`{"receipts":["` + <-receipts + `"]}`)
			var res struct {
				Results []struct {
					Status string `json:"status"`
				} `json:"results"`
			}
			benchPost(b, client, ack, body, &res)
			if len(res.Results) != 1 || res.Results[0].Status != "ok" {
				b.Errorf("ack: %+v", res)
			}
		})
	})
}

// benchTopics numbers the topics of the pull and ack benchmarks: each
// round (every b.N, every -count) gets a fresh backlog.
var benchTopics atomic.Int64

// benchServer opens a server with authentication off on loopback.
func benchServer(b *testing.B) string {
	b.Helper()
	cfg := server.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.SegmentSize = "127.0.0.1:0", b.TempDir(), 256<<20
	cfg.LogOutput, cfg.LogFormat, cfg.LogLevel = io.Discard, "json", "warn"
	cfg.ShutdownDelay = 0
	s, err := server.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	return "http://" + s.Addr()
}

// benchParallel runs op from 8×GOMAXPROCS goroutines and reports msgs/s
// (perOp messages each op).
func benchParallel(b *testing.B, perOp int, op func()) {
	b.SetParallelism(8)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			op()
		}
	})
	b.ReportMetric(float64(b.N*perOp)/time.Since(start).Seconds(), "msgs/s")
}

// benchPost posts a JSON body, requires a 200 and decodes into out when
// it is not nil.
func benchPost(b *testing.B, client *http.Client, url string, body []byte, out any) {
	benchPostType(b, client, url, "application/json", body, out)
}

// benchPostType posts body with the given Content-Type and decodes the
// answer into out (discards it when out is nil).
func benchPostType(b *testing.B, client *http.Client, url, contentType string, body []byte, out any) {
	resp, err := client.Post(url, contentType, bytes.NewReader(body))
	if err != nil {
		b.Error(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		b.Errorf("%s: %d %s", url, resp.StatusCode, msg)
		return
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		b.Error(err)
	}
}

// benchFill sends n messages of size bytes to topic, in batches of 256
// from 4 clients.
func benchFill(b *testing.B, client *http.Client, base, topic string, n, size int) {
	b.Helper()
	url := base + "/v1/topics/" + topic + "/messages"
	full := benchSendBody(256, size)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				body := full
				if k != 256 {
					body = benchSendBody(k, size)
				}
				benchPost(b, client, url, body, nil)
			}
		}()
	}
	for left := n; left > 0; left -= 256 {
		work <- min(left, 256)
	}
	close(work)
	wg.Wait()
}

// benchSendBody is a send request of n messages of size bytes.
func benchSendBody(n, size int) []byte {
	msg := `{"body":"` + strings.Repeat("x", size) + `"}`
	if n == 1 {
		return []byte(msg)
	}
	return []byte(`{"messages":[` + strings.TrimSuffix(strings.Repeat(msg+",", n), ",") + `]}`)
}
