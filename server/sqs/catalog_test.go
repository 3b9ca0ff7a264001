package sqs_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestRESTListsSQSQueues: GET /v1/sqs/queues of the REST API lists the
// queues by their SQS names with the topic and group holding each, the
// endpoint, URLs, ARNs, redrive links both ways, attributes and tags, as
// the SDK made them; a queue made through the REST API as a topic
// sqs_<name> is listed too.
func TestRESTListsSQSQueues(t *testing.T) {
	c, s := startSQS(t)
	ctx := context.Background()
	ep := "http://" + s.Srv.SQSAddr()
	dlq := createQueue(t, c, "orders-dlq", nil)
	createQueue(t, c, "orders", map[string]string{"VisibilityTimeout": "45",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:orders-dlq","maxReceiveCount":"3"}`})
	createQueue(t, c, "jobs.fifo", map[string]string{"FifoQueue": "true"})
	_, err := c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(dlq), Tags: map[string]string{"team": "billing"}})
	require.NoError(t, err)
	servertest.Decode(t, s.JSON(t, http.MethodPut, "/v1/topics/sqs_native", api.TopicRequest{Queues: 2}), http.StatusCreated, nil)

	var list api.SQSQueueList
	servertest.Decode(t, s.Get(t, "/v1/sqs/queues"), http.StatusOK, &list)
	require.True(t, list.Enabled)
	require.Equal(t, ep, list.Endpoint)
	names := []string{}
	byName := map[string]api.SQSQueue{}
	for _, q := range list.Queues {
		names = append(names, q.Name)
		byName[q.Name] = q
	}
	require.Equal(t, []string{"jobs.fifo", "native", "orders", "orders-dlq"}, names)

	orders := byName["orders"]
	require.Equal(t, "sqs_orders", orders.Topic)
	require.Equal(t, "sqs_orders", orders.Group)
	require.False(t, orders.Fifo)
	require.Equal(t, ep+"/000000000000/orders", orders.URL)
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:orders", orders.Arn)
	require.Equal(t, "orders-dlq", orders.DeadLetterQueue)
	require.Equal(t, 3, orders.MaxReceiveCount)
	require.Equal(t, "45", orders.Attributes["VisibilityTimeout"])
	require.Empty(t, orders.DeadLetterSourceQueues)
	require.NotEmpty(t, orders.CreatedAt)

	d := byName["orders-dlq"]
	require.Equal(t, []string{"orders"}, d.DeadLetterSourceQueues)
	require.Equal(t, map[string]string{"team": "billing"}, d.Tags)
	require.Empty(t, d.DeadLetterQueue)

	jobs := byName["jobs.fifo"]
	require.True(t, jobs.Fifo)
	require.Equal(t, "sqsfifo_jobs", jobs.Topic)
	require.Equal(t, "true", jobs.Attributes["FifoQueue"])

	require.Equal(t, "sqs_native", byName["native"].Topic)
	require.Equal(t, "30", byName["native"].Attributes["VisibilityTimeout"], "the defaults")

	servertest.Decode(t, s.Get(t, "/v1/sqs/queues?prefix=orders"), http.StatusOK, &list)
	require.Len(t, list.Queues, 2)
	servertest.WantProblem(t, s.Get(t, "/v1/sqs/queues?prefix=%3Cscript%3E"), http.StatusBadRequest, "invalid-argument")
}

// TestQueueTableSurvivesForeignMessages: messages sent to the queue
// table's topic through the REST API (garbage, or JSON that is no table)
// are skipped after a restart: the endpoint keeps its queues' attributes
// and answers no 5xx.
func TestQueueTableSurvivesForeignMessages(t *testing.T) {
	c, s := startSQS(t)
	ctx := context.Background()
	createQueue(t, c, "kept", map[string]string{"VisibilityTimeout": "45"})
	for _, body := range []string{"garbage", `{"v":2,"queues":{}}`, `{"queues":null}`, `[]`} {
		s.Send(t, "sqs-meta", api.SendMessage{Body: body})
	}
	s = s.Reopen(t)
	c = newClient(t, "http://"+s.Srv.SQSAddr(), "AKIDEXAMPLE", "secret")
	url := "http://" + s.Srv.SQSAddr() + "/000000000000/kept"
	attrs, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []types.QueueAttributeName{"VisibilityTimeout"}})
	require.NoError(t, err)
	require.Equal(t, "45", attrs.Attributes["VisibilityTimeout"])
	_, err = c.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: map[string]string{"DelaySeconds": "1"}})
	require.NoError(t, err)
}
