package sqs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

func receive(t *testing.T, c *sqs.Client, url string, n int32, wait int32) []types.Message {
	t.Helper()
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: n, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"}, MessageAttributeNames: []string{"All"}})
	require.NoError(t, err)
	return out.Messages
}

func TestRedriveToDeadLetterQueue(t *testing.T) {
	c, s := startSQS(t)
	ctx := context.Background()
	dlq := createQueue(t, c, "orders-dlq", nil)
	policy := `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:orders-dlq","maxReceiveCount":"2"}`
	src := createQueue(t, c, "orders", map[string]string{"VisibilityTimeout": "1", "RedrivePolicy": policy})
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(src), AttributeNames: []types.QueueAttributeName{"RedrivePolicy"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:orders-dlq","maxReceiveCount":2}`, attrs.Attributes["RedrivePolicy"])

	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String("poison"),
		MessageAttributes: map[string]types.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("bad")}}})
	require.NoError(t, err)
	// Received twice (maxReceiveCount), never deleted.
	for i := 1; i <= 2; i++ {
		var got []types.Message
		require.Eventually(t, func() bool { got = receive(t, c, src, 1, 2); return len(got) == 1 }, 15*time.Second, time.Millisecond)
		require.Equal(t, fmt.Sprint(i), got[0].Attributes["ApproximateReceiveCount"])
	}
	// The third receive does not come: the message went to the DLQ …
	var dead []types.Message
	require.Eventually(t, func() bool { dead = receive(t, c, dlq, 10, 1); return len(dead) == 1 }, 20*time.Second, time.Millisecond)
	require.Equal(t, "poison", *dead[0].Body)
	require.Equal(t, *sent.MessageId, *dead[0].MessageId)
	require.Equal(t, "bad", *dead[0].MessageAttributes["kind"].StringValue)
	require.Empty(t, receive(t, c, src, 10, 0))
	// … and mqgate's DLQ API lists it too.
	r := s.Get(t, "/v1/groups/sqs_orders/dlq")
	require.Equal(t, http.StatusOK, r.Status, r.String())
	require.Contains(t, string(r.Body), "sqs_orders")
	var listed struct {
		Items []json.RawMessage `json:"items"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &listed), r.String())
	require.Len(t, listed.Items, 1, r.String())

	// Deleted from the DLQ queue, it is not copied again.
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlq), ReceiptHandle: dead[0].ReceiptHandle})
	require.NoError(t, err)
	time.Sleep(1500 * time.Millisecond) // a pass of the mover
	require.Empty(t, receive(t, c, dlq, 10, 1))

	srcs, err := c.ListDeadLetterSourceQueues(ctx, &sqs.ListDeadLetterSourceQueuesInput{QueueUrl: aws.String(dlq)})
	require.NoError(t, err)
	require.Equal(t, []string{src}, srcs.QueueUrls)
}

func TestRedrivePolicyChecks(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	createQueue(t, c, "target", map[string]string{"RedriveAllowPolicy": `{"redrivePermission":"denyAll"}`})
	createQueue(t, c, "target2.fifo", map[string]string{"FifoQueue": "true"})
	for _, policy := range []string{
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:missing","maxReceiveCount":3}`,      // no such queue
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:target","maxReceiveCount":3}`,       // denied
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:target2.fifo","maxReceiveCount":3}`, // FIFO target of a standard queue
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:target","maxReceiveCount":1000}`,    // above mqgate's limit
		`{"deadLetterTargetArn":"nope","maxReceiveCount":3}`,
		`not json`,
	} {
		_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("src"), Attributes: map[string]string{"RedrivePolicy": policy}})
		code := apiCode(t, err)
		require.True(t, code == "InvalidParameterValue" || code == "InvalidAttributeValue", "%s: %s", policy, code)
	}
}

func TestFIFOOrderAndDeduplication(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs.fifo")})
	require.NoError(t, err) // the .fifo name makes it a FIFO queue
	url := createQueue(t, c, "jobs.fifo", map[string]string{"FifoQueue": "true"})
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"FifoQueue"}})
	require.NoError(t, err)
	require.Equal(t, "true", attrs.Attributes["FifoQueue"])

	// Without a dedup id and without content-based dedup: refused.
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"), MessageGroupId: aws.String("g")})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d")})
	require.Equal(t, "MissingParameter", apiCode(t, err))

	var seqs []string
	for g := range 3 {
		for i := range 5 {
			out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprintf("g%d-%d", g, i)),
				MessageGroupId: aws.String(fmt.Sprintf("g%d", g)), MessageDeduplicationId: aws.String(fmt.Sprintf("d%d-%d", g, i))})
			require.NoError(t, err)
			require.NotEmpty(t, *out.SequenceNumber)
			seqs = append(seqs, *out.SequenceNumber)
		}
	}
	// A duplicate id: accepted, not delivered again.
	dup, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("g0-0"),
		MessageGroupId: aws.String("g0"), MessageDeduplicationId: aws.String("d0-0")})
	require.NoError(t, err)
	require.Equal(t, seqs[0], *dup.SequenceNumber)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("other body"),
		MessageGroupId: aws.String("g0"), MessageDeduplicationId: aws.String("d0-1")})
	require.NoError(t, err)

	// Each group's messages come in order, each after the one before it
	// is deleted.
	next := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for len(next) < 3 || next["g0"] < 5 || next["g1"] < 5 || next["g2"] < 5 {
		require.True(t, time.Now().Before(deadline), "got %v", next)
		for _, m := range receive(t, c, url, 10, 1) {
			g := m.Attributes["MessageGroupId"]
			require.Equal(t, fmt.Sprintf("%s-%d", g, next[g]), *m.Body)
			require.Equal(t, fmt.Sprintf("d%s-%d", strings.TrimPrefix(g, "g"), next[g]), m.Attributes["MessageDeduplicationId"])
			require.NotEmpty(t, m.Attributes["SequenceNumber"])
			next[g]++
			_, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
	require.Empty(t, receive(t, c, url, 10, 1), "no duplicates")

	// Content-based deduplication.
	cb := createQueue(t, c, "cb.fifo", map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"})
	for range 3 {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(cb), MessageBody: aws.String("same"), MessageGroupId: aws.String("g")})
		require.NoError(t, err)
	}
	got := receive(t, c, cb, 10, 2)
	require.Len(t, got, 1)
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(cb), ReceiptHandle: got[0].ReceiptHandle})
	require.NoError(t, err)
	require.Empty(t, receive(t, c, cb, 10, 1))

	// FIFO only: no per-message delay, ContentBasedDeduplication only on FIFO.
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(cb), MessageBody: aws.String("x"), MessageGroupId: aws.String("g"), DelaySeconds: 5})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("std"), Attributes: map[string]string{"ContentBasedDeduplication": "true"}})
	require.Equal(t, "InvalidAttributeName", apiCode(t, err))
}

func TestFairQueueGroupAttribute(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "fair", nil)
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"), MessageGroupId: aws.String("tenant-1")})
	require.NoError(t, err)
	got := receive(t, c, url, 1, 5)
	require.Len(t, got, 1)
	require.Equal(t, "tenant-1", got[0].Attributes["MessageGroupId"])
}

func TestMessageMoveTask(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	dlq := createQueue(t, c, "mv-dlq", nil)
	src := createQueue(t, c, "mv", map[string]string{"VisibilityTimeout": "1",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:mv-dlq","maxReceiveCount":2}`})
	ids := map[string]bool{}
	for i := range 3 {
		out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String(fmt.Sprint("m", i))})
		require.NoError(t, err)
		ids[*out.MessageId] = true
	}
	// Receive each message twice without deleting it: all three die.
	seen := 0
	require.Eventually(t, func() bool { seen += len(receive(t, c, src, 10, 1)); return seen >= 6 }, 30*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(dlq), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
		require.NoError(t, err)
		return a.Attributes["ApproximateNumberOfMessages"] == "3"
	}, 20*time.Second, 50*time.Millisecond)

	_, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:mv")})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err), "mv is no dead-letter queue")
	task, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:mv-dlq")})
	require.NoError(t, err)
	require.NotEmpty(t, *task.TaskHandle)
	var list *sqs.ListMessageMoveTasksOutput
	require.Eventually(t, func() bool {
		list, err = c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String("arn:aws:sqs:us-east-1:000000000000:mv-dlq")})
		require.NoError(t, err)
		return len(list.Results) == 1 && *list.Results[0].Status == "COMPLETED"
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, int64(3), list.Results[0].ApproximateNumberOfMessagesMoved)

	// Back in the source queue, with their MessageIds.
	got := map[string]bool{}
	require.Eventually(t, func() bool {
		for _, m := range receive(t, c, src, 10, 1) {
			got[*m.MessageId] = true
			_, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(src), ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
		return len(got) == 3
	}, 20*time.Second, time.Millisecond)
	require.Equal(t, ids, got)
	require.Empty(t, receive(t, c, dlq, 10, 1))
	_, err = c.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: task.TaskHandle})
	require.Error(t, err, "the task is over")
}

// TestFairQueueSpreadsTenants: a noisy tenant's backlog does not hold the
// other tenants' messages back behind it.
func TestFairQueueSpreadsTenants(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "tenants", nil)
	send := func(group, body string) {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body), MessageGroupId: aws.String(group)})
		require.NoError(t, err)
	}
	for i := range 100 {
		send("noisy", fmt.Sprint("noisy-", i))
	}
	for i := range 8 {
		send(fmt.Sprint("quiet-", i), "quiet")
	}
	quiet := 0
	for range 4 { // 40 of 108 messages, none deleted
		for _, m := range receive(t, c, url, 10, 1) {
			if *m.Body == "quiet" {
				quiet++
			}
		}
	}
	require.Positive(t, quiet, "the quiet tenants wait behind the noisy one")
}

// TestMessageMoveTaskSurvivesRestart: a task stopped by a restart is
// listed after it as it was (same handle, RUNNING, its progress), resumes
// on its own and moves every message exactly once; a finished task is
// still listed after the next restart.
func TestMessageMoveTaskSurvivesRestart(t *testing.T) {
	const n = 12
	c, s := startSQS(t)
	ctx := context.Background()
	createQueue(t, c, "rs-dlq", nil)
	src := createQueue(t, c, "rs", map[string]string{"VisibilityTimeout": "1",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:rs-dlq","maxReceiveCount":2}`})
	ids := map[string]bool{}
	for i := range n {
		out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(src), MessageBody: aws.String(fmt.Sprint("m", i))})
		require.NoError(t, err)
		ids[*out.MessageId] = true
	}
	seen := 0
	require.Eventually(t, func() bool { seen += len(receive(t, c, src, 10, 1)); return seen >= 2*n }, 60*time.Second, time.Millisecond)
	dlqArn := "arn:aws:sqs:us-east-1:000000000000:rs-dlq"
	count := func(c *sqs.Client, url string) string {
		a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"All"}})
		require.NoError(t, err)
		return a.Attributes["ApproximateNumberOfMessages"] + "/" + a.Attributes["ApproximateNumberOfMessagesNotVisible"]
	}
	require.Eventually(t, func() bool { return count(c, strings.Replace(src, "/rs", "/rs-dlq", 1)) == fmt.Sprint(n, "/0") }, 30*time.Second, 50*time.Millisecond)

	task, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: aws.String(dlqArn), MaxNumberOfMessagesPerSecond: aws.Int32(2)})
	require.NoError(t, err)
	list := func(c *sqs.Client) types.ListMessageMoveTasksResultEntry {
		out, err := c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: aws.String(dlqArn), MaxResults: aws.Int32(10)})
		require.NoError(t, err)
		require.Len(t, out.Results, 1)
		return out.Results[0]
	}
	require.Eventually(t, func() bool { return list(c).ApproximateNumberOfMessagesMoved >= 3 }, 20*time.Second, 20*time.Millisecond)

	s = s.Reopen(t)
	ep := "http://" + s.Srv.SQSAddr()
	c = newClient(t, ep, "AKIDEXAMPLE", "secret")
	src = ep + "/000000000000/rs"
	before := list(c)
	require.Equal(t, "RUNNING", *before.Status)
	require.Equal(t, *task.TaskHandle, *before.TaskHandle)
	require.GreaterOrEqual(t, before.ApproximateNumberOfMessagesMoved, int64(3), "the progress written at shutdown")
	require.Less(t, before.ApproximateNumberOfMessagesMoved, int64(n))
	require.Equal(t, int64(n), *before.ApproximateNumberOfMessagesToMove)
	require.Equal(t, int32(2), *before.MaxNumberOfMessagesPerSecond)
	var after types.ListMessageMoveTasksResultEntry
	require.Eventually(t, func() bool { after = list(c); return *after.Status == "COMPLETED" }, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, int64(n), after.ApproximateNumberOfMessagesMoved)
	require.Equal(t, "0/0", count(c, ep+"/000000000000/rs-dlq"))

	// Every message back in the source queue once, with its MessageId.
	got := map[string]int{}
	require.Eventually(t, func() bool {
		for _, m := range receive(t, c, src, 10, 1) {
			got[*m.MessageId]++
			_, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(src), ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
		return len(got) == n
	}, 20*time.Second, time.Millisecond)
	require.Empty(t, receive(t, c, src, 10, 2), "no message twice")
	for id := range ids {
		require.Equal(t, 1, got[id], id)
	}

	// The finished task is still listed after the next restart.
	s = s.Reopen(t)
	c = newClient(t, "http://"+s.Srv.SQSAddr(), "AKIDEXAMPLE", "secret")
	again := list(c)
	require.Equal(t, "COMPLETED", *again.Status)
	require.Equal(t, int64(n), again.ApproximateNumberOfMessagesMoved)
	require.Nil(t, again.TaskHandle, "only a running task shows its handle")
	_, err = c.CancelMessageMoveTask(ctx, &sqs.CancelMessageMoveTaskInput{TaskHandle: task.TaskHandle})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err), "the task is over")
}
