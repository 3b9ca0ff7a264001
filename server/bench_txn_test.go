package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mqgate/mqgate/api"
)

// BenchmarkHTTPTransaction measures a transaction over real HTTP next to
// a plain send on the same server: SendSingle sends one 1 KiB message per
// op, HalfAndCommit sends it as a half message and commits it (two
// requests, two fsyncs), HalfAndRollback rolls it back instead.
//
//	go test -run '^$' -bench HTTPTransaction -benchtime 2s ./server/
func BenchmarkHTTPTransaction(b *testing.B) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	b.Cleanup(client.CloseIdleConnections)
	base := benchServer(b)
	send := base + "/v1/topics/txbench/messages"
	plain := benchSendBody(1, 1024)
	half := []byte(`{"body":"` + strings.Repeat("x", 1024) + `","transactional":true,"producerGroup":"bench"}`)
	benchPost(b, client, send, plain, nil) // creates the topic
	b.Run("SendSingle", func(b *testing.B) {
		benchParallel(b, 1, func() { benchPost(b, client, send, plain, nil) })
	})
	for _, end := range []string{"commit", "rollback"} {
		b.Run("HalfAnd"+strings.ToUpper(end[:1])+end[1:], func(b *testing.B) {
			benchParallel(b, 1, func() {
				var res api.SendResponse
				benchPost(b, client, send, half, &res)
				if len(res.Results) == 1 {
					benchPost(b, client, base+"/v1/transactions/"+res.Results[0].TransactionID+"/"+end, nil, nil)
				}
			})
		})
	}
}
