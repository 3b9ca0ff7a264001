package servertest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkValidateResponse: what the spec check adds to one pull
// response of 32 messages.
func BenchmarkValidateResponse(b *testing.B) {
	msgs := make([]string, 32)
	for i := range msgs {
		msgs[i] = fmt.Sprintf(`{"messageId":"7F00000100001F9000000000000004D2","receipt":"r%d","topic":"orders","queueId":1,"queueOffset":%d,"reconsumeTimes":0,"tag":"t","keys":["k"],"properties":{"a":"b"},"body":"hello world","bodyEncoding":"utf8","bornAt":"2026-11-29T10:00:00.000Z","storedAt":"2026-11-29T10:00:00.001Z"}`, i, i)
	}
	body := []byte(`{"messages":[` + strings.Join(msgs, ",") + "]}\n")
	header := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}}
	if err := ValidateResponse("POST", "/v1/groups/g/topics/orders/pull", 200, header, body); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = ValidateResponse("POST", "/v1/groups/g/topics/orders/pull", 200, header, body)
	}
}

// BenchmarkValidateSmallResponse: the check of an ack's answer.
func BenchmarkValidateSmallResponse(b *testing.B) {
	body := []byte(`{"results":[{"receipt":"r","status":"ok"}]}` + "\n")
	header := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}}
	if err := ValidateResponse("POST", "/v1/groups/g/ack", 200, header, body); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = ValidateResponse("POST", "/v1/groups/g/ack", 200, header, body)
	}
}
