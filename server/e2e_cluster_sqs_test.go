package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/internal/testnet"
	"github.com/mqgate/mqgate/server"
)

// TestClusterSQSAndAdminOnEveryNode: with --sqs-listen and
// --admin-listen, every replica serves both. An AWS SDK client signing
// with SigV4 creates a queue and sends through one follower, receives
// through the other and deletes through the leader: a follower forwards
// the call to the leader's SQS handler, which checks the signature of
// the client's own request. Each node's admin address answers /livez,
// /readyz and /metrics. The leader closed, the SDK's calls through a
// remaining node reach the next leader, which holds the queue and the
// messages.
func TestClusterSQSAndAdminOnEveryNode(t *testing.T) {
	t.Parallel()
	acl := newACL(t, `
accounts:
  - accessKey: sqs-app
    secretKey: sqs-app-secret-0001
    admin: true
`)
	var sqsAddrs, adminAddrs []string
	for range 3 {
		sqsAddrs, adminAddrs = append(sqsAddrs, testnet.FreeAddr(t)), append(adminAddrs, testnet.FreeAddr(t))
	}
	next := 0
	c := startCluster(t, func(cfg *server.Config) {
		cfg.ACLFile, cfg.ClusterSecret = acl, "cluster-secret-0001"
		cfg.SQSListen, cfg.AdminListen = sqsAddrs[next], adminAddrs[next]
		next++
	})
	lead := c.leader(t, basic("sqs-app", "sqs-app-secret-0001"))
	f1, f2 := (lead+1)%3, (lead+2)%3
	for i := range c.nodes {
		require.Equal(t, sqsAddrs[i], c.nodes[i].Srv.SQSAddr())
		require.Equal(t, adminAddrs[i], c.nodes[i].Srv.AdminAddr())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := func(i int) *sqs.Client {
		return sqs.New(sqs.Options{
			Region: "us-east-1", BaseEndpoint: aws.String("http://" + sqsAddrs[i]),
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: "sqs-app", SecretAccessKey: "sqs-app-secret-0001", Source: "test"}, nil
			}),
			RetryMaxAttempts: 10,
		})
	}
	created, err := client(f1).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("jobs")})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(aws.ToString(created.QueueUrl), "http://"+sqsAddrs[f1]+"/"),
		"the queue URL names the node the client called: %s", aws.ToString(created.QueueUrl))
	url := func(i int) *string {
		return aws.String(strings.Replace(aws.ToString(created.QueueUrl), sqsAddrs[f1], sqsAddrs[i], 1))
	}
	for _, body := range []string{"one", "two"} {
		_, err := client(f1).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url(f1), MessageBody: aws.String(body)})
		require.NoError(t, err)
	}
	got, err := client(f2).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url(f2), MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
		VisibilityTimeout: 300})
	require.NoError(t, err)
	require.Len(t, got.Messages, 2)
	_, err = client(lead).DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: url(lead), ReceiptHandle: got.Messages[0].ReceiptHandle})
	require.NoError(t, err)

	// A wrong secret is refused by the leader, through a follower too.
	wrong := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + sqsAddrs[f1]), RetryMaxAttempts: 1,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "sqs-app", SecretAccessKey: "not-the-secret", Source: "test"}, nil
		})})
	_, err = wrong.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url(f1), MessageBody: aws.String("x")})
	require.Error(t, err)
	require.Contains(t, err.Error(), "SignatureDoesNotMatch")

	for i := range c.nodes {
		for _, path := range []string{"/livez", "/readyz", "/metrics"} {
			resp, err := http.Get("http://" + adminAddrs[i] + path)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "node %d %s: %s", i, path, b)
			if path == "/metrics" {
				require.Contains(t, string(b), "mqgate_", "node %d", i)
			}
		}
	}

	// The leader goes: the calls through a remaining node reach the next
	// one, which holds the queue and the message not deleted.
	c.nodes[lead].Close(t)
	c.nodes[lead] = nil
	nl := c.leader(t, basic("sqs-app", "sqs-app-secret-0001"), lead)
	other := f1
	if other == nl {
		other = f2
	}
	require.Eventually(t, func() bool {
		attrs, err := client(other).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url(other),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		return err == nil && attrs.Attributes["ApproximateNumberOfMessagesNotVisible"] == "1"
	}, 30*time.Second, 100*time.Millisecond, "the message received and not deleted is still in flight on the next leader")
	_, err = client(other).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url(other), MessageBody: aws.String("three")})
	require.NoError(t, err)
	again, err := client(nl).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url(nl), MaxNumberOfMessages: 10, WaitTimeSeconds: 2})
	require.NoError(t, err)
	require.Len(t, again.Messages, 1)
	require.Equal(t, "three", aws.ToString(again.Messages[0].Body))
}
