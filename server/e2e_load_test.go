package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// post does one JSON POST from any goroutine (no t.FailNow off the test
// goroutine); out may be nil.
func (e *e2eServer) post(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d", path, resp.StatusCode)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

// TestE2EProducersAndConsumers: 8 producers and 8 consumers per group, two
// groups, over HTTP. Every sent message is delivered and acknowledged
// exactly once per group; none is lost.
func TestE2EProducersAndConsumers(t *testing.T) {
	e := startE2E(t)
	servertest.Decode(t, e.JSON(t, http.MethodPut, "/v1/topics/load", api.TopicRequest{Queues: 4}), http.StatusCreated, nil)
	const producers, each, consumers = 8, 100, 8
	total := producers * each
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if err := e.post(ctx, "/v1/topics/load/messages", api.SendMessage{Body: fmt.Sprintf("p%d-%d", p, i)}, nil); err != nil {
					errs <- err
					return
				}
			}
		}(p)
	}
	type tally struct {
		mu    sync.Mutex
		acked map[string]int
	}
	groups := map[string]*tally{"ga": {acked: map[string]int{}}, "gb": {acked: map[string]int{}}}
	for g, tl := range groups {
		for c := 0; c < consumers; c++ {
			wg.Add(1)
			go func(g string, tl *tally) {
				defer wg.Done()
				for ctx.Err() == nil {
					tl.mu.Lock()
					done := len(tl.acked) == total
					tl.mu.Unlock()
					if done {
						return
					}
					var got api.PullResponse
					if err := e.post(ctx, "/v1/groups/"+g+"/topics/load/pull", api.PullRequest{MaxMessages: 16, WaitMs: 200, InvisibleMs: 60_000}, &got); err != nil {
						errs <- err
						return
					}
					if len(got.Messages) == 0 {
						continue
					}
					req := api.AckRequest{}
					for _, m := range got.Messages {
						req.Receipts = append(req.Receipts, m.Receipt)
					}
					var res api.ReceiptResponse
					if err := e.post(ctx, "/v1/groups/"+g+"/ack", req, &res); err != nil {
						errs <- err
						return
					}
					tl.mu.Lock()
					for i, r := range res.Results {
						if r.Status == "ok" {
							tl.acked[got.Messages[i].Body]++
						}
					}
					tl.mu.Unlock()
				}
			}(g, tl)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for g, tl := range groups {
		require.Len(t, tl.acked, total, "group %s: every message delivered and acknowledged", g)
		for body, n := range tl.acked {
			require.Equal(t, 1, n, "group %s: %s acknowledged %d times", g, body, n)
		}
	}
}
