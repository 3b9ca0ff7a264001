package server_test

// A property test from the HTTP API to the record decoder: for arbitrary
// send requests — values of every length around every limit, from
// alphabets with spaces, separators, control characters and multi-byte
// runes, as JSON and as raw sends with headers — whatever the API accepts
// is stored as a record that decodes, dispatches and pulls back equal to
// what was sent; whatever it refuses is a 4xx problem. Nothing is ever
// quarantined and no request gets a 5xx.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/servertest"
)

// lengths are the sizes values are drawn with: small ones and the
// neighbourhood of every limit.
var lengths = []int{0, 1, 2, 7, 40, 127, 128, 129, 254, 255, 256, 300, 1024, 4096, 16_300, 16_384, 16_400}

// alphabets are what values are made of.
var alphabets = []string{
	"abcxyz019",
	"ab_-.:/",
	"a b\tc",
	"a|b",
	"é€😀ñ",
	"a\x00\x01\x1f\x7f",
	"\u2028\u00a0x",
}

func textGen(max int) *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		n := rapid.SampledFrom(lengths).Draw(t, "len")
		if n > max {
			n = max
		}
		alphabet := []rune(rapid.SampledFrom(alphabets).Draw(t, "alphabet"))
		var b strings.Builder
		for b.Len() < n {
			b.WriteRune(alphabet[rapid.IntRange(0, len(alphabet)-1).Draw(t, "rune")])
		}
		return b.String()
	})
}

// sentMessage is what a request asked to store.
type sentMessage struct {
	body       []byte
	tag        string
	keys       []string
	properties map[string]string
}

func TestE2ESendDecodeProperty(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	stored, refused := 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		var want sentMessage
		var resp servertest.Resp
		if rapid.Bool().Draw(rt, "raw") {
			want.body = rapid.SliceOfN(rapid.Byte(), 1, 3000).Draw(rt, "body")
			header := http.Header{}
			if tag := textGen(300).Draw(rt, "tag"); headerSafe(tag) {
				header.Set("X-Mqgate-Tag", tag)
				want.tag = strings.Trim(tag, " \t")
			}
			n := rapid.IntRange(0, 4).Draw(rt, "properties")
			for i := 0; i < n; i++ {
				v := textGen(5000).Draw(rt, "value")
				if !headerSafe(v) {
					continue
				}
				name := fmt.Sprintf("p%d", i)
				header.Set("X-Mqgate-Property-"+name, v)
				if want.properties == nil {
					want.properties = map[string]string{}
				}
				want.properties[name] = strings.Trim(v, " \t")
			}
			resp = e.Do(t, http.MethodPost, "/v1/topics/prop/messages", "application/octet-stream", want.body, header)
		} else {
			msg := api.SendMessage{
				Tag:         textGen(300).Draw(rt, "tag"),
				ShardingKey: textGen(300).Draw(rt, "shardingKey"),
				DedupID:     "",
			}
			if rapid.Bool().Draw(rt, "binary") {
				want.body = rapid.SliceOfN(rapid.Byte(), 0, 3000).Draw(rt, "body")
				msg.Body, msg.BodyEncoding = base64.StdEncoding.EncodeToString(want.body), "base64"
			} else {
				msg.Body = textGen(20_000).Draw(rt, "body")
				want.body = []byte(msg.Body)
			}
			msg.Keys = rapid.SliceOfN(textGen(300), 0, 3).Draw(rt, "keys")
			msg.Properties = rapid.MapOfN(textGen(300), textGen(17_000), 0, 4).Draw(rt, "properties")
			want.tag, want.keys, want.properties = msg.Tag, msg.Keys, msg.Properties
			body, err := json.Marshal(msg)
			require.NoError(t, err)
			resp = e.Do(t, http.MethodPost, "/v1/topics/prop/messages", "application/json", body, nil)
		}
		require.Less(rt, resp.Status, 500, "never a 5xx: %s", resp)
		if resp.Status != http.StatusOK {
			refused++
			return // do() checked it is a problem with a code
		}
		stored++
		var res api.SendResponse
		servertest.Decode(t, resp, http.StatusOK, &res)
		require.Len(rt, res.Results, 1)

		// Read back by id (the record's CRC is verified and it decodes)...
		got := e.Message(t, res.Results[0].MessageID)
		requireSame(rt, want, got)
		// ...and through the dispatcher, by a pull.
		pulled := e.PullN(t, "prop-readers", "prop", 1, 60_000, 10*time.Second)
		require.Equal(rt, res.Results[0].MessageID, pulled[0].MessageID)
		requireSame(rt, want, api.Message{Body: pulled[0].Body, BodyEncoding: pulled[0].BodyEncoding, Tag: pulled[0].Tag, Keys: pulled[0].Keys, Properties: pulled[0].Properties})
		require.Equal(rt, []string{"ok"}, e.Ack(t, "prop-readers", pulled[0].Receipt))
	})
	t.Logf("%d sends stored and read back equal, %d refused with a 4xx problem", stored, refused)
	require.Positive(t, stored)
	require.Positive(t, refused)
	var status api.BrokerStatus
	servertest.Decode(t, e.Get(t, "/v1/broker/status"), http.StatusOK, &status)
	require.Zero(t, status.Quarantine.Count, "nothing accepted was set aside")
}

// headerSafe reports whether a client can send v as a header value
// (no control characters but tab; net/http refuses the others).
func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return v != ""
}

func requireSame(t require.TestingT, want sentMessage, got api.Message) {
	body := []byte(got.Body)
	if got.BodyEncoding == "base64" {
		var err error
		body, err = base64.StdEncoding.DecodeString(got.Body)
		require.NoError(t, err)
	}
	require.True(t, bytes.Equal(want.body, body), "body")
	require.Equal(t, want.tag, got.Tag)
	if len(want.keys) == 0 {
		require.Empty(t, got.Keys)
	} else {
		require.Equal(t, want.keys, got.Keys)
	}
	if len(want.properties) == 0 {
		require.Empty(t, got.Properties)
	} else {
		require.Equal(t, want.properties, got.Properties)
	}
}
