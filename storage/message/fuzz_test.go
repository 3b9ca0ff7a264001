package message_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqgate/mqgate/storage/message"
)

// addSeeds adds valid payloads and a few broken ones to the fuzz corpus.
func addSeeds(f *testing.F) {
	f.Helper()
	for _, m := range []*message.Message{
		sampleMessage(),
		{Topic: "t"},
		{Topic: "t", Properties: map[string]string{"a": "", message.PropertyKeys: "k1 k2"}},
	} {
		b := make([]byte, m.PayloadSize())
		m.EncodePayload(b)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte{})
	f.Add(make([]byte, message.MinPayloadSize))
}

func FuzzDecodePayload(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var m message.Message
		if err := message.DecodePayload(b, &m); err != nil {
			require.ErrorIs(t, err, message.ErrCorrupt)
			return
		}
		// Whatever decodes is a valid message whose encoding has the same
		// size and decodes to the same message (property order may differ).
		require.NoError(t, m.Validate())
		require.Equal(t, len(b), m.PayloadSize())
		again := make([]byte, m.PayloadSize())
		m.EncodePayload(again)
		var m2 message.Message
		require.NoError(t, message.DecodePayload(again, &m2))
		require.Equal(t, m, m2)

		var d message.DispatchInfo
		require.NoError(t, message.DecodeDispatch(b, &d))
		requireDispatchAgrees(t, &m, &d)
	})
}

func FuzzDecodeDispatch(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var d message.DispatchInfo
		dispatchErr := message.DecodeDispatch(b, &d)
		var m message.Message
		payloadErr := message.DecodePayload(b, &m)
		// The decoders agree: whatever the dispatcher accepts can be read
		// back, and the other way round.
		if dispatchErr != nil {
			require.ErrorIs(t, dispatchErr, message.ErrCorrupt)
			require.Error(t, payloadErr, "DecodeDispatch is never stricter than DecodePayload")
			return
		}
		require.NoError(t, payloadErr, "DecodePayload is never stricter than DecodeDispatch")
		requireDispatchAgrees(t, &m, &d)
	})
}

func FuzzParseID(f *testing.F) {
	f.Add("C0A8000100002A9F0123456789ABCDEF")
	f.Add("c0a8000100002a9f0123456789abcdef")
	f.Add("")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := message.ParseID(s)
		if err != nil {
			require.ErrorIs(t, err, message.ErrBadID)
			return
		}
		require.Equal(t, strings.ToUpper(s), id.String())
		again, err := message.ParseID(id.String())
		require.NoError(t, err)
		require.Equal(t, id, again)
	})
}
