package sqs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server/servertest"
)

// The SQS endpoint's throughput next to the native API's on the same
// server, batches of 10 messages of 256 bytes, one client:
//
//	go test -run XXX -bench . -benchtime 3s ./server/sqs/
//
// Each op is one batch (a send, or a receive and the delete of what it
// got); msgs/s is the figure to compare. A receive the SDK retries after
// its own closed-connection race (aws/aws-sdk-go-v2#2737) leaves the first
// attempt's messages leased until their visibility timeout, so the
// receive benchmarks count what each call got rather than drain the
// queue.

const benchBatch = 10

var benchBody = strings.Repeat("x", 256)

// nativeJSON posts body to the native API and decodes the answer into out
// (a plain client: the servertest client's spec validation would be
// measured too).
func nativeJSON(b *testing.B, s *servertest.Server, path string, in, out any) {
	body, _ := json.Marshal(in)
	resp, err := http.Post(s.Base+path, "application/json", bytes.NewReader(body))
	require.NoError(b, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	require.Equal(b, http.StatusOK, resp.StatusCode, string(data))
	if out != nil {
		require.NoError(b, json.Unmarshal(data, out))
	}
}

func sqsBatch() []types.SendMessageBatchRequestEntry {
	entries := make([]types.SendMessageBatchRequestEntry, benchBatch)
	for i := range entries {
		entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("m", i)), MessageBody: aws.String(benchBody)}
	}
	return entries
}

func nativeBatch() map[string]any {
	msgs := make([]map[string]any, benchBatch)
	for i := range msgs {
		msgs[i] = map[string]any{"body": benchBody}
	}
	return map[string]any{"messages": msgs}
}

func BenchmarkSendBatchSQS(b *testing.B) {
	c, _ := startSQSBench(b)
	url := createQueueB(b, c, "bench")
	entries := sqsBatch()
	b.ResetTimer()
	for range b.N {
		out, err := c.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			b.Fatal(err, out.Failed)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkSendBatchNative(b *testing.B) {
	c, s := startSQSBench(b)
	createQueueB(b, c, "bench") // the same topic
	batch := nativeBatch()
	b.ResetTimer()
	for range b.N {
		nativeJSON(b, s, "/v1/topics/sqs_bench/messages", batch, nil)
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkReceiveDeleteBatchSQS(b *testing.B) {
	c, s := startSQSBench(b)
	url := createQueueB(b, c, "bench")
	batch := nativeBatch()
	for range b.N + 10 {
		nativeJSON(b, s, "/v1/topics/sqs_bench/messages", batch, nil)
	}
	ctx := context.Background()
	b.ResetTimer()
	got, calls := 0, 0
	for range b.N {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: benchBatch, WaitTimeSeconds: 1})
		require.NoError(b, err, "after %d messages, %d calls, %v", got, calls, b.Elapsed())
		if len(out.Messages) == 0 {
			continue
		}
		entries := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint("d", i)), ReceiptHandle: m.ReceiptHandle}
		}
		del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		require.NoError(b, err)
		require.Empty(b, del.Failed)
		got += len(out.Messages)
		calls++
	}
	b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(got)/float64(calls), "msgs/receive")
}

func BenchmarkPullAckBatchNative(b *testing.B) {
	c, s := startSQSBench(b)
	createQueueB(b, c, "bench")
	batch := nativeBatch()
	for range b.N + 10 {
		nativeJSON(b, s, "/v1/topics/sqs_bench/messages", batch, nil)
	}
	b.ResetTimer()
	got, calls := 0, 0
	for range b.N {
		var out struct {
			Messages []struct {
				Receipt string `json:"receipt"`
			} `json:"messages"`
		}
		nativeJSON(b, s, "/v1/groups/sqs_bench/topics/sqs_bench/pull", map[string]any{"maxMessages": benchBatch, "waitMs": 1000}, &out)
		if len(out.Messages) == 0 {
			continue
		}
		receipts := make([]string, len(out.Messages))
		for i, m := range out.Messages {
			receipts[i] = m.Receipt
		}
		nativeJSON(b, s, "/v1/groups/sqs_bench/ack", map[string]any{"receipts": receipts}, nil)
		got += len(out.Messages)
		calls++
	}
	b.ReportMetric(float64(got)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(got)/float64(calls), "msgs/receive")
}

func startSQSBench(b *testing.B) (*sqs.Client, *servertest.Server) { return startSQSFor(b) }

func createQueueB(b *testing.B, c *sqs.Client, name string) string {
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	require.NoError(b, err)
	return *out.QueueUrl
}
