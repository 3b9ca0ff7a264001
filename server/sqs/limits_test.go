package sqs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
)

// noRetries makes an SDK client answer with the first error it gets.
func noRetries(o *sqs.Options) { o.RetryMaxAttempts = 1 }

// TestWaitingReceivesCap: with --sqs-max-waiting-receives 50, of 250
// receives waiting at once 50 wait and the 200 others are refused at once
// with RequestThrottled (what the SDKs retry with backoff); the 50 get the
// messages sent next, and their slots are free again afterwards. A
// receive over the cap still gets the messages that are there at once.
func TestWaitingReceivesCap(t *testing.T) {
	const limit, callers = 50, 250
	c, _ := startSQS(t, func(c *server.Config) { c.SQSMaxWaitingReceives = limit })
	ctx := context.Background()
	url := createQueue(t, c, "capped", nil)
	other := createQueue(t, c, "other", nil)

	type result struct {
		msgs []types.Message
		err  error
	}
	results := make(chan result, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20}, noRetries)
			if err != nil {
				results <- result{err: err}
				return
			}
			results <- result{msgs: out.Messages}
		})
	}
	for range callers - limit {
		select {
		case r := <-results:
			require.Equal(t, "RequestThrottled", apiCode(t, r.err))
		case <-time.After(15 * time.Second):
			t.Fatal("the receives over the cap were not refused at once")
		}
	}

	// While the 50 wait, a receive of another queue is over the cap too,
	// but gets a message that is already there.
	_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(other), WaitTimeSeconds: 20}, noRetries)
	require.Equal(t, "RequestThrottled", apiCode(t, err))
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(other), MessageBody: aws.String("ready")})
	require.NoError(t, err)
	got, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(other), WaitTimeSeconds: 20}, noRetries)
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	// A short poll never takes a slot.
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(other)}, noRetries)
	require.NoError(t, err)

	for i := range limit {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(string(rune('a' + i)))})
		require.NoError(t, err)
	}
	received := 0
	for range limit {
		r := <-results
		require.NoError(t, r.err)
		received += len(r.msgs)
	}
	wg.Wait()
	require.Equal(t, limit, received, "each waiting receive got a message")

	// The slots are free again: 50 receives wait at once, and none is refused.
	for range limit {
		wg.Go(func() {
			_, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(other), WaitTimeSeconds: 1}, noRetries)
			results <- result{err: err}
		})
	}
	wg.Wait()
	for range limit {
		require.NoError(t, (<-results).err)
	}
}
