package sqs

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mqgate/mqgate/server/auth"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/server/broker/brokertest"
)

// fuzzHandler is a handler on a real broker in a temp dir, with one
// standard and one FIFO queue.
func fuzzHandler(f *testing.F) *Handler {
	b := brokertest.MustOpen(f, f.TempDir(), func(o *broker.Options) { o.AutoCreate = true })
	h := New(Options{Broker: b, RedriveInterval: time.Hour})
	f.Cleanup(h.Close)
	for _, body := range []string{`{"QueueName":"q"}`, `{"QueueName":"q.fifo","Attributes":{"FifoQueue":"true"}}`} {
		if w := serve(h, false, "CreateQueue", body); w.Code != http.StatusOK {
			f.Fatalf("create queue: %d %s", w.Code, w.Body)
		}
	}
	return h
}

func serve(h *Handler, query bool, op, body string) *httptest.ResponseRecorder {
	var r *http.Request
	if query {
		r = httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9324/", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(http.MethodPost, "http://127.0.0.1:9324/", strings.NewReader(body))
		r.Header.Set("X-Amz-Target", "AmazonSQS."+op)
		r.Header.Set("Content-Type", jsonContentType)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r.WithContext(ctx))
	return w
}

// checkAnswer fails on a 5xx or an answer in the wrong shape.
func checkAnswer(t *testing.T, w *httptest.ResponseRecorder, query bool) {
	if w.Code >= 500 {
		t.Fatalf("%d: %s", w.Code, w.Body)
	}
	if w.Code != http.StatusOK {
		if query && !bytes.Contains(w.Body.Bytes(), []byte("<ErrorResponse>")) {
			t.Fatalf("query error not an ErrorResponse: %s", w.Body)
		}
		if !query && !bytes.Contains(w.Body.Bytes(), []byte(`"__type"`)) {
			t.Fatalf("JSON error without __type: %s", w.Body)
		}
	}
}

// FuzzJSONRequest drives the JSON 1.0 decoder and every operation with
// arbitrary bodies: never a 5xx, never a panic, errors in the SDKs' shape.
func FuzzJSONRequest(f *testing.F) {
	h := fuzzHandler(f)
	url := "http://127.0.0.1:9324/000000000000/q"
	for _, seed := range []struct{ op, body string }{
		{"SendMessage", `{"QueueUrl":"` + url + `","MessageBody":"x","MessageAttributes":{"a":{"DataType":"Number","StringValue":"1"}}}`},
		{"SendMessageBatch", `{"QueueUrl":"` + url + `","Entries":[{"Id":"a","MessageBody":"x"},{"Id":"a","MessageBody":"y"}]}`},
		{"ReceiveMessage", `{"QueueUrl":"` + url + `","MaxNumberOfMessages":10,"AttributeNames":["All"]}`},
		{"DeleteMessage", `{"QueueUrl":"` + url + `","ReceiptHandle":"mq1abc"}`},
		{"ChangeMessageVisibilityBatch", `{"QueueUrl":"` + url + `","Entries":[{"Id":"a","ReceiptHandle":"x","VisibilityTimeout":-1}]}`},
		{"SetQueueAttributes", `{"QueueUrl":"` + url + `","Attributes":{"RedrivePolicy":"{\"maxReceiveCount\":\"x\"}"}}`},
		{"SendMessage", `{"QueueUrl":"http://h/000000000000/q.fifo","MessageBody":"x","MessageGroupId":"g","MessageDeduplicationId":"d"}`},
		{"CreateQueue", `{"QueueName":"a.fifo","Attributes":{"FifoQueue":"false"}}`},
		{"GetQueueAttributes", `{"QueueUrl":"` + url + `","AttributeNames":["All"]}`},
		{"ListQueues", `{"MaxResults":0,"NextToken":"%%"}`},
		{"Nope", `[]`},
		{"SendMessage", `{"QueueUrl":1}`},
	} {
		f.Add(seed.op, seed.body)
	}
	f.Fuzz(func(t *testing.T, op, body string) {
		if op == "DeleteQueue" || op == "PurgeQueue" {
			op = "GetQueueUrl" // keep the queues the other inputs use
		}
		if strings.Contains(body, "WaitTimeSeconds") {
			body = strings.ReplaceAll(body, "WaitTimeSeconds", "W") // no long polls
		}
		checkAnswer(t, serve(h, false, op, body), false)
	})
}

// FuzzQueryRequest drives the query protocol's decoder (form posts) and
// every operation: never a 5xx, never a panic, errors as ErrorResponse.
func FuzzQueryRequest(f *testing.F) {
	h := fuzzHandler(f)
	url := "http%3A%2F%2F127.0.0.1%3A9324%2F000000000000%2Fq"
	for _, seed := range []string{
		"Action=SendMessage&QueueUrl=" + url + "&MessageBody=x&MessageAttribute.1.Name=a&MessageAttribute.1.Value.DataType=Binary&MessageAttribute.1.Value.BinaryValue=AAE%3D",
		"Action=SendMessageBatch&QueueUrl=" + url + "&SendMessageBatchRequestEntry.1.Id=a&SendMessageBatchRequestEntry.1.MessageBody=x&SendMessageBatchRequestEntry.1.DelaySeconds=x",
		"Action=ReceiveMessage&QueueUrl=" + url + "&AttributeName.1=All&MaxNumberOfMessages=10",
		"Action=DeleteMessageBatch&QueueUrl=" + url + "&DeleteMessageBatchRequestEntry.1.Id=a&DeleteMessageBatchRequestEntry.1.ReceiptHandle=mq1x",
		"Action=SetQueueAttributes&QueueUrl=" + url + "&Attribute.1.Name=DelaySeconds&Attribute.1.Value=1000",
		"Action=CreateQueue&QueueName=z.fifo&Attribute.1.Name=FifoQueue&Attribute.1.Value=true&Tag.1.Key=k&Tag.1.Value=v",
		"Action=ListQueues&MaxResults=2",
		"Action=GetQueueAttributes&QueueUrl=" + url + "&AttributeName.1=QueueArn",
		"Action=Nope",
		"%zz",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		lower := strings.ToLower(body)
		if strings.Contains(lower, "deletequeue") || strings.Contains(lower, "purgequeue") || strings.Contains(lower, "waittimeseconds") {
			return // keep the queues, no long polls
		}
		checkAnswer(t, serve(h, true, "", body), true)
	})
}

// staticACL is an auth.Source of one ACL.
type staticACL struct{ acl *auth.ACL }

func (s staticACL) ACL() *auth.ACL { return s.acl }

// FuzzSignature drives the SigV4 parsers — the Authorization header and
// a presigned URL's query — with arbitrary values, alone and together:
// never a 5xx, never a panic, always an answer in the protocol's shape.
func FuzzSignature(f *testing.F) {
	acl, err := auth.Parse([]byte("accounts:\n  - accessKey: admin\n    secretKey: admin-secret\n    admin: true\n"))
	if err != nil {
		f.Fatal(err)
	}
	b := brokertest.MustOpen(f, f.TempDir(), func(o *broker.Options) { o.AutoCreate = true })
	h := New(Options{Broker: b, RedriveInterval: time.Hour, ACL: staticACL{acl}})
	f.Cleanup(h.Close)
	date := time.Now().UTC().Format("20060102T150405Z")
	for _, seed := range []struct{ query, authorization string }{
		{"Action=ListQueues&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=admin%2F" + date[:8] + "%2Fus-east-1%2Fsqs%2Faws4_request&X-Amz-Date=" + date + "&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=00", ""},
		{"X-Amz-Expires=-1&X-Amz-Algorithm=AWS4-HMAC-SHA256", ""},
		{"X-Amz-Credential=%2F%2F%2F%2F&X-Amz-Signature=zz", ""},
		{"", "AWS4-HMAC-SHA256 Credential=admin/" + date[:8] + "/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc"},
		{"", "AWS4-HMAC-SHA256 Credential=a/b/c/d/aws4_request,SignedHeaders=,Signature="},
		{"X-Amz-Signature=1", "AWS4-HMAC-SHA256 x"},
		{"Action=ListQueues", "Basic YTpi"},
	} {
		f.Add(seed.query, seed.authorization, date)
	}
	f.Fuzz(func(t *testing.T, query, authorization, amzDate string) {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:9324/", nil)
		r.URL.RawQuery = query
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		if amzDate != "" {
			r.Header.Set("X-Amz-Date", amzDate)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		checkAnswer(t, w, true)
		if w.Code == http.StatusOK {
			t.Fatalf("a request no one signed was served: %s %q", query, authorization)
		}
	})
}
