package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"
)

// sqsClient is an aws-sdk-go-v2 SQS client of the endpoint at addr.
func sqsClient(addr string) *sqs.Client {
	return sqs.New(sqs.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		}),
	})
}

// TestKill9DuringMessageMoveTask: the real binary is killed (SIGKILL)
// while an SQS message move task runs. After the restart the task is
// listed RUNNING under its handle, resumes on its own — waiting for the
// messages it held to come back from their lease — and completes; every
// message is back in its source queue exactly once, the dead-letter
// queue is empty.
func TestKill9DuringMessageMoveTask(t *testing.T) {
	if testing.Short() {
		t.Skip("a kill -9 and a 30-second lease")
	}
	t.Parallel()
	const n = 20
	ctx := context.Background()
	dir, addr, sqsAddr := t.TempDir(), freeAddr(t), freeAddr(t)
	p := startServer(t, dir, addr, "--sqs-listen", sqsAddr)
	c := sqsClient(sqsAddr)
	dlqURL := "http://" + sqsAddr + "/000000000000/k9-dlq"
	srcURL := "http://" + sqsAddr + "/000000000000/k9"
	_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("k9-dlq")})
	require.NoError(t, err)
	_, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("k9"), Attributes: map[string]string{"VisibilityTimeout": "1",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:k9-dlq","maxReceiveCount":2}`}})
	require.NoError(t, err)
	ids := map[string]bool{}
	for i := range n {
		out, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(srcURL), MessageBody: aws.String(fmt.Sprint("m", i))})
		require.NoError(t, err)
		ids[*out.MessageId] = true
	}
	receives := 0
	require.Eventually(t, func() bool {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(srcURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(t, err)
		receives += len(out.Messages)
		return receives >= 2*n
	}, 60*time.Second, time.Millisecond)
	waiting := func(url string) string {
		a, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"All"}})
		require.NoError(t, err)
		return a.Attributes["ApproximateNumberOfMessages"] + "/" + a.Attributes["ApproximateNumberOfMessagesNotVisible"]
	}
	require.Eventually(t, func() bool { return waiting(dlqURL) == fmt.Sprint(n, "/0") }, 30*time.Second, 50*time.Millisecond)

	arn := aws.String("arn:aws:sqs:us-east-1:000000000000:k9-dlq")
	task, err := c.StartMessageMoveTask(ctx, &sqs.StartMessageMoveTaskInput{SourceArn: arn, MaxNumberOfMessagesPerSecond: aws.Int32(4)})
	require.NoError(t, err)
	list := func(c *sqs.Client) types.ListMessageMoveTasksResultEntry {
		out, err := c.ListMessageMoveTasks(ctx, &sqs.ListMessageMoveTasksInput{SourceArn: arn})
		require.NoError(t, err)
		require.Len(t, out.Results, 1)
		return out.Results[0]
	}
	require.Eventually(t, func() bool { return list(c).ApproximateNumberOfMessagesMoved >= 5 }, 30*time.Second, 10*time.Millisecond)
	p.kill9()

	startServer(t, dir, addr, "--sqs-listen", sqsAddr)
	c = sqsClient(sqsAddr)
	after := list(c)
	require.Equal(t, "RUNNING", *after.Status, "a crash leaves the task running, to be resumed")
	require.Equal(t, *task.TaskHandle, *after.TaskHandle)
	require.Eventually(t, func() bool { return *list(c).Status == "COMPLETED" }, 90*time.Second, 100*time.Millisecond)
	require.Equal(t, "0/0", waiting(dlqURL))

	got := map[string]int{}
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(srcURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 2, VisibilityTimeout: 60})
		require.NoError(t, err)
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			got[*m.MessageId]++
		}
	}
	require.Len(t, got, n)
	for id := range ids {
		require.Equal(t, 1, got[id], "message %s back once", id)
	}
}
