package sqs_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
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

// presign returns the presigned URL of a query-protocol call (a GET
// with the parameters in the query, or a POST of them as a form) signed
// by key and secret at time at, good for expires ("" leaves
// X-Amz-Expires out).
func presign(t *testing.T, ep, method string, params url.Values, key, secret string, at time.Time, expires string) (string, []byte) {
	t.Helper()
	var body []byte
	target := ep + "/"
	if method == http.MethodGet {
		q := url.Values{}
		for k, v := range params {
			q[k] = v
		}
		if expires != "" {
			q.Set("X-Amz-Expires", expires)
		}
		target += "?" + q.Encode()
	} else {
		body = []byte(params.Encode())
		if expires != "" {
			target += "?X-Amz-Expires=" + expires
		}
	}
	req, err := http.NewRequest(method, target, bytes.NewReader(body))
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret},
		req, hex.EncodeToString(sum[:]), "sqs", "us-east-1", at)
	require.NoError(t, err)
	return signed, body
}

// call sends a presigned request as-is.
func call(t *testing.T, method, target string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, target, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return do(t, req)
}

// TestPresignedURLs: URLs the SDK's v4 signer presigns (PresignHTTP) work
// once, for GET and POST of the query protocol, until X-Amz-Expires; a
// wrong secret, an unknown key, a tampered parameter or body, an expired
// or not yet valid URL, a replay and a malformed X-Amz-Expires are
// refused with the codes AWS uses.
func TestPresignedURLs(t *testing.T) {
	ep := startSigned(t)
	ctx := context.Background()
	admin := newClient(t, ep, "admin", "admin-secret-1")
	queueURL := createQueue(t, admin, "orders", nil)
	now := time.Now()
	list := url.Values{"Action": {"ListQueues"}, "Version": {"2012-11-05"}}

	// GET, then the same URL again: a replay.
	signed, _ := presign(t, ep, http.MethodGet, list, "admin", "admin-secret-1", now, "60")
	require.Contains(t, signed, "X-Amz-Signature=")
	status, body := call(t, http.MethodGet, signed, nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<ListQueuesResponse")
	require.Contains(t, body, queueURL)
	status, body = call(t, http.MethodGet, signed, nil)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "replay")

	// POST: the producer sends through a presigned URL; the body is signed.
	send := url.Values{"Action": {"SendMessage"}, "QueueUrl": {queueURL}, "MessageBody": {"presigned"}}
	signed, form := presign(t, ep, http.MethodPost, send, "producer", "producer-secret", now, "300")
	tampered := bytes.Replace(form, []byte("presigned"), []byte("tampered!"), 1)
	status, body = call(t, http.MethodPost, signed, tampered)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "SignatureDoesNotMatch")
	status, body = call(t, http.MethodPost, signed, form)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<SendMessageResponse")
	got := receive(t, newClient(t, ep, "consumer", "consumer-secret"), queueURL, 1, 5)
	require.Len(t, got, 1)
	require.Equal(t, "presigned", *got[0].Body)
	// Permissions are the account's: the producer may not receive.
	signed, _ = presign(t, ep, http.MethodGet, url.Values{"Action": {"ReceiveMessage"}, "QueueUrl": {queueURL}}, "producer", "producer-secret", now, "60")
	status, body = call(t, http.MethodGet, signed, nil)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "AccessDenied")

	// A URL signed 10 minutes ago for an hour is good; one signed 2
	// minutes ago for 60 s, or 10 minutes ago without X-Amz-Expires, is
	// not; nor is one dated 10 minutes ahead.
	signed, _ = presign(t, ep, http.MethodGet, list, "admin", "admin-secret-1", now.Add(-10*time.Minute), "3600")
	status, body = call(t, http.MethodGet, signed, nil)
	require.Equal(t, http.StatusOK, status, body)
	for _, c := range []struct {
		at      time.Time
		expires string
	}{{now.Add(-2 * time.Minute), "60"}, {now.Add(-10 * time.Minute), ""}, {now.Add(10 * time.Minute), "3600"}} {
		signed, _ = presign(t, ep, http.MethodGet, list, "admin", "admin-secret-1", c.at, c.expires)
		status, body = call(t, http.MethodGet, signed, nil)
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "RequestExpired")
	}

	// Wrong secret, unknown key.
	signed, _ = presign(t, ep, http.MethodGet, list, "admin", "wrong-secret", now, "60")
	status, body = call(t, http.MethodGet, signed, nil)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "SignatureDoesNotMatch")
	signed, _ = presign(t, ep, http.MethodGet, list, "nobody", "whatever", now, "60")
	status, body = call(t, http.MethodGet, signed, nil)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "InvalidClientTokenId")

	// A parameter changed or added after signing.
	signed, _ = presign(t, ep, http.MethodGet, list, "admin", "admin-secret-1", now, "60")
	for _, edit := range []func(u *url.URL){
		func(u *url.URL) {
			q := u.Query()
			q.Set("Action", "DeleteQueue")
			q.Set("QueueUrl", queueURL)
			u.RawQuery = q.Encode()
		},
		func(u *url.URL) { q := u.Query(); q.Set("QueueNamePrefix", "x"); u.RawQuery = q.Encode() },
		func(u *url.URL) { q := u.Query(); q.Set("X-Amz-Expires", "604800"); u.RawQuery = q.Encode() },
		func(u *url.URL) {
			q := u.Query()
			q.Set("X-Amz-Date", now.Add(time.Second).UTC().Format("20060102T150405Z"))
			u.RawQuery = q.Encode()
		},
	} {
		u, err := url.Parse(signed)
		require.NoError(t, err)
		edit(u)
		status, body = call(t, http.MethodGet, u.String(), nil)
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "SignatureDoesNotMatch")
	}

	// Malformed query authentication.
	for _, expires := range []string{"0", "604801", "soon"} {
		signed, _ = presign(t, ep, http.MethodGet, list, "admin", "admin-secret-1", now, expires)
		status, body = call(t, http.MethodGet, signed, nil)
		require.Equal(t, http.StatusForbidden, status, body)
		require.Contains(t, body, "IncompleteSignature")
	}
	for _, q := range []string{
		"X-Amz-Algorithm=AWS4-HMAC-SHA1&Action=ListQueues",
		"X-Amz-Signature=00&Action=ListQueues",
		"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=admin%2F20200101%2Fus-east-1%2Fsqs&X-Amz-Signature=00&X-Amz-SignedHeaders=host",
		"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=admin%2F20200101%2Fus-east-1%2Fsqs%2Faws4_request&X-Amz-Date=yesterday&X-Amz-Signature=00&X-Amz-SignedHeaders=host",
		"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Algorithm=AWS4-HMAC-SHA256&Action=ListQueues",
	} {
		status, body = call(t, http.MethodGet, ep+"/?"+q, nil)
		require.Equal(t, http.StatusForbidden, status, "%s: %s", q, body)
		require.Contains(t, body, "IncompleteSignature", q)
	}
	// Both an Authorization header and a presigned URL.
	signed, _ = presign(t, ep, http.MethodGet, list, "admin", "admin-secret-1", now, "60")
	req, err := http.NewRequest(http.MethodGet, signed, nil)
	require.NoError(t, err)
	require.NoError(t, v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: "admin", SecretAccessKey: "admin-secret-1"}, req,
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sqs", "us-east-1", now))
	status, body = do(t, req)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "Only one authentication method")
}

// TestSigV4UnsignedTargetRefused: X-Amz-Target picks the operation of a
// JSON call, so a signature that does not cover it is refused.
func TestSigV4UnsignedTargetRefused(t *testing.T) {
	ep := startSigned(t)
	req := signedRequest(t, ep, "admin", "admin-secret-1", time.Now())
	auth := req.Header.Get("Authorization")
	require.Contains(t, auth, "x-amz-target")
	req.Header.Set("Authorization", strings.Replace(auth, ";x-amz-target", "", 1))
	status, body := do(t, req)
	require.Equal(t, http.StatusForbidden, status, body)
	require.Contains(t, body, "X-Amz-Target must be among the signed headers")
}

// clientFrom is an HTTP client whose connections come from ip (a
// loopback address of 127.0.0.0/8).
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.DialContext = dialer.DialContext
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, Timeout: 60 * time.Second}
}

// TestSigV4FailuresThrottled: failed signatures count in the server's
// auth failure limiter, the one that slows Basic and bearer guessers.
// After --auth-failures-per-minute wrong signatures of one account from
// one address, that pair's failures get RequestThrottled with
// Retry-After, while the right secret from that very address is served,
// and so are other accounts and other addresses. Unknown access keys and
// malformed signatures count together per address. The failures show in
// mqgate_auth_failures_total.
func TestSigV4FailuresThrottled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	require.NoError(t, os.WriteFile(path, []byte(sigACL), 0o600))
	_, s := startSQS(t, func(c *server.Config) { c.ACLFile = path; c.AuthFailuresPerMinute = 10 })
	ep := "http://" + s.Srv.SQSAddr()
	ctx := context.Background()
	from := func(ip, key, secret string) *sqs.Client {
		return sqs.New(sqs.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(ep), HTTPClient: clientFrom(t, ip), RetryMaxAttempts: 1,
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: key, SecretAccessKey: secret}, nil
			}),
		})
	}
	list := func(c *sqs.Client) error {
		_, err := c.ListQueues(ctx, &sqs.ListQueuesInput{})
		return err
	}

	guesser := from("127.0.0.4", "producer", "guess")
	for range 10 {
		require.Equal(t, "SignatureDoesNotMatch", apiCode(t, list(guesser)))
	}
	require.Equal(t, "RequestThrottled", apiCode(t, list(guesser)))
	// The raw answer: 400 RequestThrottled with Retry-After.
	req := signedRequest(t, ep, "producer", "guess", time.Now())
	resp, err := clientFrom(t, "127.0.0.4").Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(raw))
	require.Contains(t, string(raw), "RequestThrottled")
	require.Equal(t, "6", resp.Header.Get("Retry-After"), "10 per minute: a token every 6 s")
	for range 3 {
		require.NoError(t, list(from("127.0.0.4", "producer", "producer-secret")), "the right secret from the guesser's own address")
	}
	require.NoError(t, list(from("127.0.0.4", "admin", "admin-secret-1")), "another account from that address")
	require.Equal(t, "SignatureDoesNotMatch", apiCode(t, list(from("127.0.0.4", "admin", "typo"))))
	require.NoError(t, list(from("127.0.0.1", "producer", "producer-secret")), "another address")
	require.Equal(t, "SignatureDoesNotMatch", apiCode(t, list(from("127.0.0.1", "producer", "typo"))))

	// Unknown access keys and malformed signatures count together per
	// address; once they are used up, every failure from there is
	// throttled, so the answer does not tell accounts from other names.
	sprayer := clientFrom(t, "127.0.0.5")
	for i := range 5 {
		require.Equal(t, "InvalidClientTokenId", apiCode(t, list(from("127.0.0.5", fmt.Sprintf("nobody-%d", i), "guess"))))
	}
	for range 5 {
		req, err := http.NewRequest(http.MethodGet, ep+"/?Action=ListQueues", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 garbage")
		resp, err := sprayer.Do(req)
		require.NoError(t, err)
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Contains(t, string(raw), "IncompleteSignature")
	}
	require.Equal(t, "RequestThrottled", apiCode(t, list(from("127.0.0.5", "nobody-else", "guess"))))
	require.Equal(t, "RequestThrottled", apiCode(t, list(from("127.0.0.5", "producer", "guess"))))
	require.NoError(t, list(from("127.0.0.5", "producer", "producer-secret")))
	// No signature is no guess: never throttled.
	anon := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(ep), HTTPClient: sprayer, Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1})
	_, err = anon.ListQueues(ctx, &sqs.ListQueuesInput{})
	require.Equal(t, "MissingAuthenticationToken", apiCode(t, err))

	admin := http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("admin:admin-secret-1"))}}
	metrics := string(s.Do(t, http.MethodGet, "/metrics", "", nil, admin).Body)
	require.Contains(t, metrics, `mqgate_auth_failures_total{account="producer",reason="bad_signature"} 14`)
	require.Contains(t, metrics, `mqgate_auth_failures_total{account="_unknown",reason="bad_signature"} 6`)
	require.Contains(t, metrics, `mqgate_auth_failures_total{account="_none",reason="malformed"} 5`)
	require.Contains(t, metrics, `mqgate_auth_failures_total{account="_none",reason="missing"} 1`)
	require.Contains(t, metrics, `mqgate_auth_throttled_total{scope="account"} 4`)
}
