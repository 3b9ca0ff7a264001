package server_test

// End-to-end tests of names and body limits over real HTTP.

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server"
	"github.com/mqgate/mqgate/server/servertest"
)

// TestE2ENameValidation over HTTP: topic names (in a send) and
// group names (in a pull) that break RocketMQ's rules or use reserved
// names are refused with 400 invalid-name and the rule in the detail; the
// longest valid names are accepted.
func TestE2ENameValidation(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	e.Send(t, "existing", api.SendMessage{Body: "x"})

	const (
		ruleChars    = "A-Z a-z 0-9 _ -"
		ruleReserved = "reserved"
	)
	cases := []struct {
		name string
		// segment is the name as it goes into the URL path.
		segment string
		// topicRule and groupRule are the expected detail fragments for a
		// topic and a group name; "" means the name is valid.
		topicRule, groupRule string
	}{
		{"Empty", "", ruleChars, ruleChars},
		{"Space", "%20", ruleChars, ruleChars},
		{"InnerSpace", "a%20b", ruleChars, ruleChars},
		{"Tab", "a%09b", ruleChars, ruleChars},
		{"Topic127Group127", strings.Repeat("t", 127), "", "the limit is 120"},
		{"Topic128", strings.Repeat("t", 128), "the limit is 127", "the limit is 120"},
		{"Group120", strings.Repeat("g", 120), "", ""},
		{"Group121", strings.Repeat("g", 121), "", "the limit is 120"},
		{"Over255", strings.Repeat("x", 256), ruleChars, ruleChars},
		{"RetryPrefix", "%25RETRY%25x", ruleReserved, ruleReserved},
		{"DLQPrefix", "%25DLQ%25x", ruleReserved, ruleReserved},
		{"PercentAlone", "%25", ruleReserved, ruleReserved},
		{"SystemPrefix", "rmq_sys_x", ruleReserved, ruleReserved},
		{"ScheduleTopic", "SCHEDULE_TOPIC_XXXX", ruleReserved, ruleReserved},
		{"Pipe", "a%7Cb", ruleChars, ruleChars},
		{"PipeUnescaped", "a|b", ruleChars, ruleChars},
		{"Dot", "a.b", ruleChars, ruleChars},
		{"DotDot", "..", ruleChars, ruleChars},
		{"Unicode", "%C3%BCber", ruleChars, ruleChars},
		{"Emoji", "%F0%9F%93%A6", ruleChars, ruleChars},
		{"ParentEncoded", "..%2Fx", ruleChars, ruleChars},
		{"EncodedSlash", "a%2Fb", ruleChars, ruleChars},
		{"EncodedBackslash", "a%5Cb", ruleChars, ruleChars},
		{"NUL", "a%00b", ruleChars, ruleChars},
		{"ValidCharset", "Az09_-", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("Topic", func(t *testing.T) {
				r := e.Do(t, http.MethodPost, "/v1/topics/"+tc.segment+"/messages", "text/plain", []byte("body"), nil)
				if tc.topicRule == "" {
					require.Equal(t, http.StatusOK, r.Status, "%s", r)
					return
				}
				p := servertest.WantProblem(t, r, http.StatusBadRequest, "invalid-name")
				require.Contains(t, p.Detail, tc.topicRule)
			})
			t.Run("Group", func(t *testing.T) {
				r := e.JSON(t, http.MethodPost, "/v1/groups/"+tc.segment+"/topics/existing/pull", api.PullRequest{})
				if tc.groupRule == "" {
					require.Equal(t, http.StatusOK, r.Status, "%s", r)
					return
				}
				p := servertest.WantProblem(t, r, http.StatusBadRequest, "invalid-name")
				require.Contains(t, p.Detail, tc.groupRule)
			})
		})
	}

	// A literal "../x" is two path segments, not a name: no route.
	servertest.WantProblem(t, e.Do(t, http.MethodPost, "/v1/topics/../x/messages", "text/plain", []byte("body"), nil), http.StatusNotFound, "not-found")
	// Nothing was created under an invalid name.
	var list api.TopicList
	servertest.Decode(t, e.Get(t, "/v1/topics"), http.StatusOK, &list)
	var names []string
	for _, tp := range list.Topics {
		names = append(names, tp.Name)
	}
	require.ElementsMatch(t, []string{"existing", strings.Repeat("t", 127), strings.Repeat("g", 120), strings.Repeat("g", 121), "Az09_-"}, names)
	var groups api.GroupList
	servertest.Decode(t, e.Get(t, "/v1/groups"), http.StatusOK, &groups)
	names = names[:0]
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	require.ElementsMatch(t, []string{strings.Repeat("g", 120), "Az09_-"}, names)
}

// TestE2EBodyLimits: a body of exactly --max-message-size is
// stored, one byte more is 413 (raw, chunked, JSON, base64, in a batch);
// empty bodies, wrong media types and invalid JSON are 400/415.
func TestE2EBodyLimits(t *testing.T) {
	t.Parallel()
	const max = 64 << 10
	e := startE2E(t, func(c *server.Config) {
		c.MaxMessageSize = max
		c.MaxRequestSize = 160 << 10
	})
	send := "/v1/topics/limits/messages"
	stored := func(t *testing.T, r servertest.Resp, size int) {
		t.Helper()
		var out api.SendResponse
		servertest.Decode(t, r, http.StatusOK, &out)
		m := e.Message(t, out.Results[0].MessageID)
		body := []byte(m.Body)
		if m.BodyEncoding == "base64" {
			var err error
			body, err = base64.StdEncoding.DecodeString(m.Body)
			require.NoError(t, err)
		}
		require.Len(t, body, size)
	}
	tooLarge := func(t *testing.T, r servertest.Resp) {
		t.Helper()
		servertest.WantProblem(t, r, http.StatusRequestEntityTooLarge, "body-too-large")
	}
	binary := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i * 7)
		}
		return b
	}

	t.Run("Raw", func(t *testing.T) {
		stored(t, e.Do(t, http.MethodPost, send, "application/octet-stream", binary(max), nil), max)
		tooLarge(t, e.Do(t, http.MethodPost, send, "application/octet-stream", binary(max+1), nil))
		tooLarge(t, e.Do(t, http.MethodPost, send, "text/plain", bytes.Repeat([]byte("x"), 4*max), nil))
	})
	t.Run("RawChunked", func(t *testing.T) {
		// io.MultiReader hides the length: the client sends it chunked.
		stored(t, e.DoReader(t, context.Background(), http.MethodPost, send, "application/octet-stream", io.MultiReader(bytes.NewReader(binary(max))), nil), max)
		tooLarge(t, e.DoReader(t, context.Background(), http.MethodPost, send, "application/octet-stream", io.MultiReader(bytes.NewReader(binary(max+1))), nil))
	})
	t.Run("JSON", func(t *testing.T) {
		stored(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: strings.Repeat("j", max)}), max)
		tooLarge(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: strings.Repeat("j", max+1)}))
		stored(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: base64.StdEncoding.EncodeToString(binary(max)), BodyEncoding: "base64"}), max)
		tooLarge(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: base64.StdEncoding.EncodeToString(binary(max + 1)), BodyEncoding: "base64"}))
	})
	t.Run("Batch", func(t *testing.T) {
		ok := []api.SendMessage{{Body: strings.Repeat("a", max)}, {Body: "small"}}
		var out api.SendResponse
		servertest.Decode(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &ok}), http.StatusOK, &out)
		require.Len(t, out.Results, 2)
		over := []api.SendMessage{{Body: "small"}, {Body: strings.Repeat("a", max+1)}}
		p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &over}), http.StatusRequestEntityTooLarge, "body-too-large")
		require.Contains(t, p.Detail, "messages[1]")
		// Over the request size (160 KiB) in total, each message within max.
		big := []api.SendMessage{{Body: strings.Repeat("a", max)}, {Body: strings.Repeat("b", max)}, {Body: strings.Repeat("c", max)}}
		tooLarge(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &big}))
		// Over the entry count.
		many := make([]api.SendMessage, api.MaxBatchMessages+1)
		for i := range many {
			many[i].Body = "m"
		}
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &many}), http.StatusBadRequest, "invalid-argument")
		many = many[:api.MaxBatchMessages]
		servertest.Decode(t, e.JSON(t, http.MethodPost, send, api.SendRequest{Messages: &many}), http.StatusOK, &out)
		require.Len(t, out.Results, api.MaxBatchMessages)
	})
	t.Run("EmptyBody", func(t *testing.T) {
		servertest.WantProblem(t, e.Do(t, http.MethodPost, send, "application/octet-stream", []byte{}, nil), http.StatusBadRequest, "empty-body")
		servertest.WantProblem(t, e.Do(t, http.MethodPost, send, "text/plain", nil, nil), http.StatusBadRequest, "empty-body")
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, api.SendMessage{Body: ""}), http.StatusBadRequest, "empty-body")
		servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, `{"messages":[{"body":"a"},{"body":""}]}`), http.StatusBadRequest, "empty-body")
		servertest.WantProblem(t, e.Do(t, http.MethodPost, send, "application/json", []byte{}, nil), http.StatusBadRequest, "malformed-request")
	})
	t.Run("WrongContentType", func(t *testing.T) {
		for _, path := range []string{"/v1/groups/g/topics/limits/pull", "/v1/groups/g/ack", "/v1/groups/g/nack", "/v1/groups/g/leases",
			"/v1/groups/g/dlq/resend", "/v1/groups/g/reset-offset"} {
			servertest.WantProblem(t, e.Do(t, http.MethodPost, path, "text/plain", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
			servertest.WantProblem(t, e.Do(t, http.MethodPost, path, "", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
			servertest.WantProblem(t, e.Do(t, http.MethodPost, path, "application/json; charset", []byte(`{}`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
		}
		for _, path := range []string{"/v1/topics/limits", "/v1/groups/g", "/v1/groups/g/offsets"} {
			servertest.WantProblem(t, e.Do(t, http.MethodPut, path, "application/x-www-form-urlencoded", []byte(`queues=4`), nil), http.StatusUnsupportedMediaType, "unsupported-media-type")
		}
		// application/*+json counts as JSON on JSON-only routes.
		r := e.Do(t, http.MethodPost, "/v1/groups/g/topics/limits/pull", "application/vnd.mqgate+json", []byte(`{}`), nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r)
	})
	t.Run("InvalidJSON", func(t *testing.T) {
		for _, body := range []string{`{"body":`, `{"body":"a"} trailing`, `{"body":"a","bogus":1}`, `["body"]`, `{"body":1}`, `nul`} {
			p := servertest.WantProblem(t, e.JSON(t, http.MethodPost, send, body), http.StatusBadRequest, "malformed-request")
			require.NotEmpty(t, p.Detail)
		}
		for _, path := range []string{"/v1/groups/g/topics/limits/pull", "/v1/groups/g/ack"} {
			servertest.WantProblem(t, e.JSON(t, http.MethodPost, path, `{`), http.StatusBadRequest, "malformed-request")
		}
	})
}
