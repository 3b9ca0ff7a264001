package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// startSQS starts a real server with --sqs-listen on a free loopback
// port and returns an SDK client of it (and the server).
func startSQS(t *testing.T, opts ...func(*server.Config)) (*sqs.Client, *servertest.Server) {
	t.Helper()
	return startSQSFor(t, opts...)
}

func startSQSFor(t testing.TB, opts ...func(*server.Config)) (*sqs.Client, *servertest.Server) {
	t.Helper()
	opts = append([]func(*server.Config){func(c *server.Config) { c.SQSListen = "127.0.0.1:0" }}, opts...)
	s := servertest.Start(t, opts...)
	return newClient(t, "http://"+s.Srv.SQSAddr(), "AKIDEXAMPLE", "secret"), s
}

// newClient is an aws-sdk-go-v2 SQS client of endpoint, with static
// credentials and the SDK's default retries: the errors the tests expect
// are not retried, and a retry covers the SDK's own race that fails a
// read of a 200 answer with "use of closed network connection" under load
// (aws/aws-sdk-go-v2#2737), which the benchmarks hit.
func newClient(t testing.TB, endpoint, key, secret string) *sqs.Client {
	t.Helper()
	return sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: key, SecretAccessKey: secret, Source: "test"}, nil
		}),
	})
}

// apiCode is the error code of err as the SDK parsed it.
func apiCode(t *testing.T, err error) string {
	t.Helper()
	require.Error(t, err)
	var ae smithy.APIError
	require.True(t, errors.As(err, &ae), "not an API error: %v", err)
	return ae.ErrorCode()
}

func createQueue(t *testing.T, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	require.NoError(t, err)
	return *out.QueueUrl
}

func TestQueueLifecycle(t *testing.T) {
	c, s := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "orders", map[string]string{"VisibilityTimeout": "45"})
	require.Equal(t, "http://"+s.Srv.SQSAddr()+"/000000000000/orders", url)

	// The same attributes again: the same URL; different ones: an error.
	require.Equal(t, url, createQueue(t, c, "orders", map[string]string{"VisibilityTimeout": "45"}))
	_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("orders"), Attributes: map[string]string{"VisibilityTimeout": "46"}})
	var exists *types.QueueNameExists
	require.ErrorAs(t, err, &exists)

	got, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")})
	require.NoError(t, err)
	require.Equal(t, url, *got.QueueUrl)
	_, err = c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("nope")})
	var missing *types.QueueDoesNotExist
	require.ErrorAs(t, err, &missing)
	require.Equal(t, "AWS.SimpleQueueService.NonExistentQueue", apiCode(t, err))

	// Paging through ListQueues with a prefix.
	for i := range 5 {
		createQueue(t, c, fmt.Sprintf("page-%d", i), nil)
	}
	var pages [][]string
	var token *string
	for {
		out, err := c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String("page-"), MaxResults: aws.Int32(2), NextToken: token})
		require.NoError(t, err)
		pages = append(pages, out.QueueUrls)
		if out.NextToken == nil {
			break
		}
		token = out.NextToken
	}
	require.Len(t, pages, 3)
	require.Len(t, pages[2], 1)
	require.Contains(t, pages[2][0], "/page-4")
	all, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
	require.NoError(t, err)
	require.Len(t, all.QueueUrls, 6)

	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"All"}})
	require.NoError(t, err)
	require.Equal(t, "45", attrs.Attributes["VisibilityTimeout"])
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:orders", attrs.Attributes["QueueArn"])
	require.Equal(t, "0", attrs.Attributes["ApproximateNumberOfMessages"])
	require.NotEmpty(t, attrs.Attributes["CreatedTimestamp"])

	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"DelaySeconds": "3", "ReceiveMessageWaitTimeSeconds": "2"}})
	require.NoError(t, err)
	attrs, err = c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"DelaySeconds", "ReceiveMessageWaitTimeSeconds"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"DelaySeconds": "3", "ReceiveMessageWaitTimeSeconds": "2"}, attrs.Attributes)
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"Bogus": "1"}})
	require.Equal(t, "InvalidAttributeName", apiCode(t, err))
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"VisibilityTimeout": "43201"}})
	require.Equal(t, "InvalidAttributeValue", apiCode(t, err))

	// Attributes outlive a restart (the queue table is in the store).
	cfg := s.Cfg
	s.Close(t)
	s2 := servertest.Open(t, cfg)
	c2 := newClient(t, "http://"+s2.Srv.SQSAddr(), "AKIDEXAMPLE", "secret")
	attrs, err = c2.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"VisibilityTimeout", "DelaySeconds"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"VisibilityTimeout": "45", "DelaySeconds": "3"}, attrs.Attributes)

	_, err = c2.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	require.NoError(t, err)
	_, err = c2.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")})
	require.ErrorAs(t, err, &missing)
	_, err = c2.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x")})
	require.ErrorAs(t, err, &missing)
}

func TestSendReceiveDelete(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "work", nil)

	sent, err := c.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(url),
		MessageBody: aws.String("hello ✓"),
		MessageAttributes: map[string]types.MessageAttributeValue{
			"color": {DataType: aws.String("String"), StringValue: aws.String("blue")},
			"price": {DataType: aws.String("Number"), StringValue: aws.String("12.5")},
			"blob":  {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 255}},
		},
		MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-5759e988-bd862e3fe1be46a994272793")},
		},
	})
	require.NoError(t, err) // the SDK checks the MD5s of body and attributes
	require.NotEmpty(t, *sent.MessageId)

	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 5,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"},
	})
	require.NoError(t, err) // the SDK checks the MD5s again
	require.Len(t, out.Messages, 1)
	m := out.Messages[0]
	require.Equal(t, *sent.MessageId, *m.MessageId)
	require.Equal(t, "hello ✓", *m.Body)
	require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
	require.Equal(t, "Root=1-5759e988-bd862e3fe1be46a994272793", m.Attributes["AWSTraceHeader"])
	sentAt, err := strconv.ParseInt(m.Attributes["SentTimestamp"], 10, 64)
	require.NoError(t, err)
	require.InDelta(t, time.Now().UnixMilli(), sentAt, 60_000)
	require.Equal(t, "Number", *m.MessageAttributes["price"].DataType)
	require.Equal(t, []byte{0, 1, 2, 255}, m.MessageAttributes["blob"].BinaryValue)

	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle})
	require.NoError(t, err)
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("garbage")})
	var bad *types.ReceiptHandleIsInvalid
	require.ErrorAs(t, err, &bad)

	// Nothing left: a short long poll answers empty after its wait.
	start := time.Now()
	out, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, out.Messages)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond)
}

func TestLongPollWakesOnSend(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "poll", nil)
	got := make(chan *sqs.ReceiveMessageOutput, 1)
	go func() {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
		if err != nil {
			t.Error(err)
		}
		got <- out
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("wake")})
	require.NoError(t, err)
	select {
	case out := <-got:
		require.Len(t, out.Messages, 1)
		require.Equal(t, "wake", *out.Messages[0].Body)
		require.Less(t, time.Since(start), 5*time.Second)
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not answer after a send")
	}
}

func TestVisibilityExpiryAndReceiveCount(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "vis", map[string]string{"VisibilityTimeout": "1"})
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("again")})
	require.NoError(t, err)
	recv := func(wait int32) []types.Message {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: wait,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		require.NoError(t, err)
		return out.Messages
	}
	first := recv(5)
	require.Len(t, first, 1)
	require.Equal(t, "1", first[0].Attributes["ApproximateReceiveCount"])
	require.Empty(t, recv(0), "invisible while leased")
	second := recv(10)
	require.Len(t, second, 1, "visible again after the visibility timeout")
	require.Equal(t, "2", second[0].Attributes["ApproximateReceiveCount"])
	require.Equal(t, *first[0].MessageId, *second[0].MessageId)

	// ChangeMessageVisibility extends the lease; the old handle is stale.
	_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: second[0].ReceiptHandle, VisibilityTimeout: 30})
	require.NoError(t, err)
	require.Empty(t, recv(2), "extended to 30 s")
	_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: first[0].ReceiptHandle, VisibilityTimeout: 30})
	require.Equal(t, "AWS.SimpleQueueService.MessageNotInflight", apiCode(t, err))
	// Visibility 0: visible again at once, without counting a receive.
	_, err = c.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: second[0].ReceiptHandle, VisibilityTimeout: 0})
	require.NoError(t, err)
	third := recv(5)
	require.Len(t, third, 1)
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: third[0].ReceiptHandle})
	require.NoError(t, err)
	require.Empty(t, recv(2))
}

func TestBatches(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "batch", nil)
	var entries []types.SendMessageBatchRequestEntry
	for i := range 10 {
		entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprintf("m%d", i)), MessageBody: aws.String(fmt.Sprintf("body %d", i))})
	}
	entries[3].MessageBody = aws.String("") // fails alone
	out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
	require.NoError(t, err)
	require.Len(t, out.Successful, 9)
	require.Len(t, out.Failed, 1)
	require.Equal(t, "m3", *out.Failed[0].Id)
	require.True(t, out.Failed[0].SenderFault)

	_, err = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: append(entries, entries[0])})
	var tooMany *types.TooManyEntriesInBatchRequest
	require.ErrorAs(t, err, &tooMany)
	_, err = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.SendMessageBatchRequestEntry{entries[0], entries[0]}})
	var notDistinct *types.BatchEntryIdsNotDistinct
	require.ErrorAs(t, err, &notDistinct)
	_, err = c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: []types.SendMessageBatchRequestEntry{}})
	var emptyBatch *types.EmptyBatchRequest
	require.ErrorAs(t, err, &emptyBatch)

	var got []types.Message
	require.Eventually(t, func() bool {
		r, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		require.NoError(t, err)
		got = append(got, r.Messages...)
		return len(got) >= 9
	}, 15*time.Second, 10*time.Millisecond)
	require.Len(t, got, 9)

	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessages"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ApproximateNumberOfMessagesNotVisible": "9", "ApproximateNumberOfMessages": "0"}, attrs.Attributes)

	var vis []types.ChangeMessageVisibilityBatchRequestEntry
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range got {
		vis = append(vis, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(fmt.Sprintf("v%d", i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 60})
		del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprintf("d%d", i)), ReceiptHandle: m.ReceiptHandle})
	}
	vis = append(vis, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String("bad"), ReceiptHandle: aws.String("mq1!!"), VisibilityTimeout: 60})
	vout, err := c.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: vis})
	require.NoError(t, err)
	require.Len(t, vout.Successful, 9)
	require.Len(t, vout.Failed, 1)
	require.Equal(t, "ReceiptHandleIsInvalid", *vout.Failed[0].Code)

	dout, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: del})
	require.NoError(t, err)
	require.Len(t, dout.Successful, 9)
	require.Empty(t, dout.Failed)
	attrs, err = c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessages"}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"ApproximateNumberOfMessagesNotVisible": "0", "ApproximateNumberOfMessages": "0"}, attrs.Attributes)
}

func TestPurgeQueue(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "purge", nil)
	for i := range 5 {
		_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(strconv.Itoa(i))})
		require.NoError(t, err)
	}
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessages"}})
	require.NoError(t, err)
	require.Equal(t, "5", attrs.Attributes["ApproximateNumberOfMessages"])
	_, err = c.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: aws.String(url)})
	require.NoError(t, err)
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, out.Messages)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("after")})
	require.NoError(t, err)
	out, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 5})
	require.NoError(t, err)
	require.Len(t, out.Messages, 1)
	require.Equal(t, "after", *out.Messages[0].Body)
}

func TestDelaySeconds(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	url := createQueue(t, c, "later", nil)
	start := time.Now()
	_, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"), DelaySeconds: 2})
	require.NoError(t, err)
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"ApproximateNumberOfMessagesDelayed"}})
	require.NoError(t, err)
	require.Equal(t, "1", attrs.Attributes["ApproximateNumberOfMessagesDelayed"])
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
	require.NoError(t, err)
	require.Empty(t, out.Messages)
	var got []types.Message
	require.Eventually(t, func() bool {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 1})
		require.NoError(t, err)
		got = out.Messages
		return len(got) == 1
	}, 15*time.Second, 10*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second)
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"), DelaySeconds: 901})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
}

func TestBadInput(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	_, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("bad name!")})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("x"), Attributes: map[string]string{"FifoQueue": "true"}})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	url := createQueue(t, c, "q", nil)
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 11})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 21})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("a\x01b")})
	require.Equal(t, "InvalidMessageContents", apiCode(t, err))
	_, err = c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x"),
		MessageAttributes: map[string]types.MessageAttributeValue{"n": {DataType: aws.String("Number"), StringValue: aws.String("abc")}}})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
	_, err = c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"Nope"}})
	require.Equal(t, "InvalidAttributeName", apiCode(t, err))
	_, err = c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("mq1" + "aGVsbG8")})
	require.Equal(t, "ReceiptHandleIsInvalid", apiCode(t, err))
	// Free-text attributes are bounded (the queue table keeps them): a
	// policy is a JSON object of at most 20 KiB.
	for _, policy := range []string{"not json", `{"Statement":"` + strings.Repeat("x", 20<<10) + `"}`} {
		_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"Policy": policy}})
		require.Equal(t, "InvalidAttributeValue", apiCode(t, err))
	}
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"KmsMasterKeyId": strings.Repeat("k", 2049)}})
	require.Equal(t, "InvalidAttributeValue", apiCode(t, err))
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"Policy": `{"Version":"2012-10-17","Statement":[]}`}})
	require.NoError(t, err)
}

func TestTags(t *testing.T) {
	c, _ := startSQS(t)
	ctx := context.Background()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("tagged"), Tags: map[string]string{"team": "billing"}})
	require.NoError(t, err)
	url := out.QueueUrl
	_, err = c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: url, Tags: map[string]string{"env": "prod", "team": "payments"}})
	require.NoError(t, err)
	tags, err := c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"env": "prod", "team": "payments"}, tags.Tags)
	_, err = c.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: url, TagKeys: []string{"env"}})
	require.NoError(t, err)
	tags, err = c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: url})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"team": "payments"}, tags.Tags)
	many := map[string]string{}
	for i := range 51 {
		many[fmt.Sprint("k", i)] = "v"
	}
	_, err = c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: url, Tags: many})
	require.Equal(t, "InvalidParameterValue", apiCode(t, err))
}

// TestCloseAnswersWaitingReceives: a receive waiting on a long poll is
// answered (empty) when the server shuts down, not after its 20 s.
func TestCloseAnswersWaitingReceives(t *testing.T) {
	c, s := startSQS(t)
	url := createQueue(t, c, "closing", nil)
	type result struct {
		out *sqs.ReceiveMessageOutput
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), WaitTimeSeconds: 20})
		done <- result{out, err}
	}()
	time.Sleep(500 * time.Millisecond) // the receive waits
	start := time.Now()
	s.Close(t)
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Empty(t, r.out.Messages)
		require.Less(t, time.Since(start), 10*time.Second)
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting receive was not answered at shutdown")
	}
}
