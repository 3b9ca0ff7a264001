package sqs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/server"
)

const sigACL = `accounts:
  - accessKey: admin
    secretKey: admin-secret-1
    admin: true
  - accessKey: producer
    secretKey: producer-secret
    topicPerms: ["sqs_orders=PUB"]
  - accessKey: consumer
    secretKey: [consumer-old-secret, consumer-secret]
    topicPerms: ["sqs_orders=SUB"]
    groupPerms: ["sqs_orders=SUB"]
  - accessKey: hashed
    secretKeyHash: "$2y$04$V8b0XE3C8Sxk2hvJ1rZP5OGlo7wUYbwbvm0nF2wpoCNtQm1PSkUxK"
    admin: true
`

// startSigned starts a server with authentication on (the ACL above).
func startSigned(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(path, []byte(sigACL), 0o600))
	_, s := startSQS(t, func(c *server.Config) { c.ACLFile = path; c.AuthFailuresPerMinute = 100_000 })
	return "http://" + s.Srv.SQSAddr()
}

func TestSigV4WithACLFile(t *testing.T) {
	ep := startSigned(t)
	ctx := context.Background()
	admin := newClient(t, ep, "admin", "admin-secret-1")
	url := createQueue(t, admin, "orders", nil)
	createQueue(t, admin, "other", nil)

	producer := newClient(t, ep, "producer", "producer-secret")
	consumer := newClient(t, ep, "consumer", "consumer-secret")
	_, err := producer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("signed")})
	require.NoError(t, err)
	_, err = producer.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url)})
	require.Equal(t, "AccessDenied", apiCode(t, err))
	_, err = producer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(strings.Replace(url, "orders", "other", 1)), MessageBody: aws.String("x")})
	require.Equal(t, "AccessDenied", apiCode(t, err))
	_, err = producer.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("mine")})
	require.Equal(t, "AccessDenied", apiCode(t, err))

	_, err = consumer.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x")})
	require.Equal(t, "AccessDenied", apiCode(t, err))
	out := receive(t, consumer, url, 1, 5)
	require.Len(t, out, 1)
	_, err = consumer.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: out[0].ReceiptHandle})
	require.NoError(t, err)
	// Every secret of a rotation signs.
	old := newClient(t, ep, "consumer", "consumer-old-secret")
	_, err = old.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("orders")})
	require.NoError(t, err)

	// A wrong secret, an unknown key, a hashed secret, no signature.
	_, err = newClient(t, ep, "producer", "wrong-secret").SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String("x")})
	require.Equal(t, "SignatureDoesNotMatch", apiCode(t, err))
	_, err = newClient(t, ep, "nobody", "whatever1").ListQueues(ctx, &sqs.ListQueuesInput{})
	require.Equal(t, "InvalidClientTokenId", apiCode(t, err))
	_, err = newClient(t, ep, "hashed", "hashed-secret").ListQueues(ctx, &sqs.ListQueuesInput{})
	require.Equal(t, "SignatureDoesNotMatch", apiCode(t, err))
	anon := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(ep), Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1})
	_, err = anon.ListQueues(ctx, &sqs.ListQueuesInput{})
	require.Equal(t, "MissingAuthenticationToken", apiCode(t, err))
}

// signedRequest is a ListQueues call signed by the SDK's v4 signer at
// time at.
func signedRequest(t *testing.T, ep, key, secret string, at time.Time) *http.Request {
	t.Helper()
	body := []byte(`{}`)
	req, err := http.NewRequest(http.MethodPost, ep+"/", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS.ListQueues")
	sum := sha256.Sum256(body)
	require.NoError(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret},
		req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", at))
	return req
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	if req.GetBody != nil {
		req.Body, _ = req.GetBody()
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSigV4SkewAndReplay(t *testing.T) {
	ep := startSigned(t)
	req := signedRequest(t, ep, "admin", "admin-secret-1", time.Now())
	status, body := do(t, req)
	require.Equal(t, http.StatusOK, status, body)
	// The same signed request again: a replay.
	status, body = do(t, req)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "replay")

	for _, skew := range []time.Duration{-6 * time.Minute, 6 * time.Minute} {
		status, body = do(t, signedRequest(t, ep, "admin", "admin-secret-1", time.Now().Add(skew)))
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "RequestExpired")
	}
	status, body = do(t, signedRequest(t, ep, "admin", "admin-secret-1", time.Now().Add(-4*time.Minute)))
	require.Equal(t, http.StatusOK, status, body)

	// A body changed after signing.
	req = signedRequest(t, ep, "admin", "admin-secret-1", time.Now())
	req.Body = io.NopCloser(strings.NewReader(`{"QueueNamePrefix":"x"}`))
	req.GetBody, req.ContentLength = nil, int64(len(`{"QueueNamePrefix":"x"}`))
	status, body = do(t, req)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "SignatureDoesNotMatch")
}
