package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
)

// FuzzSendStoresDecodableRecords feeds arbitrary send requests (body,
// content type, one header) to a real server and checks the promise the
// store rests on: a request the API accepts can never produce a record the
// store cannot decode or dispatch — every message of a 200 reads back by
// id — and no request gets a 5xx or leaves anything quarantined.
func FuzzSendStoresDecodableRecords(f *testing.F) {
	for _, seed := range []struct {
		contentType, header, value string
		body                       []byte
	}{
		{"application/json", "", "", []byte(`{"body":"hi","tag":"t","keys":["k1","k2"],"properties":{"a":"b"}}`)},
		{"application/json", "Idempotency-Key", "k", []byte(`{"messages":[{"body":"YQ==","bodyEncoding":"base64"},{"body":"b","shardingKey":"s 1"}]}`)},
		{"application/json", "", "", []byte(`{"body":"a","properties":{"x":"` + string(bytes.Repeat([]byte("v"), 16_000)) + `"}}`)},
		{"application/octet-stream", "X-Mqgate-Property-Color", "blue", []byte{0, 1, 2, 0xff}},
		{"text/plain", "X-Mqgate-Keys", "a, b,c", []byte("raw")},
		{"text/plain", "X-Mqgate-Tag", "caf\xe9", []byte("raw")},
		{"application/json", "", "", []byte("{\"body\":\"caf\xe9\"}")},
		{"application/json", "Idempotency-Key", "t", []byte(`{"body":"half","tag":"t","keys":["k"],"transactional":true,"producerGroup":"pg","checkAfterMs":60000}`)},
	} {
		f.Add(seed.contentType, seed.header, seed.value, seed.body)
	}

	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = f.TempDir()
	cfg.SegmentSize = 64 << 20
	cfg.LogOutput = io.Discard
	cfg.LogLevel = "error"
	srv, err := server.Open(context.Background(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	go func() { _ = srv.Serve() }()
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	base := "http://" + srv.Addr()
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(t *testing.T, path string, out any) int {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, out); err != nil {
				t.Fatalf("GET %s: %v in %s", path, err, body)
			}
		}
		return resp.StatusCode
	}

	f.Fuzz(func(t *testing.T, contentType, header, value string, body []byte) {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/topics/fuzz/messages", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if !validHeaderField(header, value) || !validHeaderField("Content-Type", contentType) {
			return // net/http refuses such a header block
		}
		if header != "" {
			req.Header.Set(header, value)
		}
		req.Header.Set("Content-Type", contentType)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("a send answered %d: %s", resp.StatusCode, answer)
		}
		if resp.StatusCode != http.StatusOK {
			return
		}
		var sent api.SendResponse
		if err := json.Unmarshal(answer, &sent); err != nil {
			t.Fatalf("200 without results: %v in %s", err, answer)
		}
		for _, r := range sent.Results {
			if r.TransactionID != "" {
				// A half message: known to the transaction state, and its
				// commit stores a message that reads back by the same id.
				if status := get(t, "/v1/transactions/"+r.TransactionID, nil); status != http.StatusOK {
					t.Fatalf("transaction %s reads back as %d", r.TransactionID, status)
				}
				resp, err := client.Post(base+"/v1/transactions/"+r.TransactionID+"/commit", "", nil)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("commit of %s answered %d", r.TransactionID, resp.StatusCode)
				}
				r.QueueOffset = 0
			}
			if r.QueueOffset < 0 {
				continue // delayed: a timer or delay-level entry, read back once due
			}
			var m api.PulledMessage
			if status := get(t, "/v1/messages/"+r.MessageID, &m); status != http.StatusOK {
				t.Fatalf("stored message %s reads back as %d", r.MessageID, status)
			}
		}
		var status api.BrokerStatus
		if get(t, "/v1/broker/status", &status) != http.StatusOK || status.Quarantine.Count != 0 {
			t.Fatalf("records quarantined after an accepted send: %+v", status.Quarantine)
		}
	})
}

// validHeaderField reports whether net/http's client sends name: value.
func validHeaderField(name, value string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte("()<>@,;:\\\"/[]?={}"), c) >= 0 {
			return false
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
