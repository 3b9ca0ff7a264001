package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMergePatchRFC7396 runs the examples of RFC 7396 appendix A.
func TestMergePatchRFC7396(t *testing.T) {
	t.Parallel()
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		{`{"n":12345678901234567890}`, `{"m":1}`, `{"m":1,"n":12345678901234567890}`},
	}
	for _, c := range cases {
		var target, patch any
		require.NoError(t, decodeLoose([]byte(c.target), &target))
		require.NoError(t, decodeLoose([]byte(c.patch), &patch))
		got, err := json.Marshal(mergePatch(target, patch))
		require.NoError(t, err)
		require.JSONEq(t, c.want, string(got), "%s + %s", c.target, c.patch)
	}
}
