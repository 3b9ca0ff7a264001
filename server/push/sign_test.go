package push

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The example of the Standard Webhooks documentation (and the reference
// libraries' tests): secret, id, timestamp and payload with the signature
// every implementation must produce.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = int64(1614265330)
	specPayload   = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func specHeader(sig string) http.Header {
	h := http.Header{}
	h.Set(HeaderID, specID)
	h.Set(HeaderTimestamp, "1614265330")
	h.Set(HeaderSignature, sig)
	return h
}

func TestSigner(t *testing.T) {
	t.Parallel()
	at := time.Unix(specTimestamp, 0)

	t.Run("OKSpecVector", func(t *testing.T) {
		t.Parallel()
		s, err := NewSigner(specSecret)
		require.NoError(t, err)
		require.Equal(t, specSignature, s.Sign(specID, specTimestamp, []byte(specPayload)))
		require.NoError(t, Verify(specSecret, specHeader(specSignature), []byte(specPayload), at, DefaultTolerance))
	})
	t.Run("OKRotatedList", func(t *testing.T) {
		t.Parallel()
		h := specHeader("v1a,bm90LWVkMjU1MTk= v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= " + specSignature)
		require.NoError(t, Verify(specSecret, h, []byte(specPayload), at.Add(4*time.Minute), DefaultTolerance))
	})
	for _, tc := range []struct {
		name    string
		secret  string
		header  http.Header
		payload string
		now     time.Time
	}{
		{"ErrTamperedBody", specSecret, specHeader(specSignature), `{"test": 2432232315}`, at},
		{"ErrOtherSecret", "whsec_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", specHeader(specSignature), specPayload, at},
		{"ErrTooOld", specSecret, specHeader(specSignature), specPayload, at.Add(6 * time.Minute)},
		{"ErrFromTheFuture", specSecret, specHeader(specSignature), specPayload, at.Add(-6 * time.Minute)},
		{"ErrOtherID", specSecret, func() http.Header { h := specHeader(specSignature); h.Set(HeaderID, "msg_x"); return h }(), specPayload, at},
		{"ErrMissingHeader", specSecret, func() http.Header { h := specHeader(specSignature); h.Del(HeaderTimestamp); return h }(), specPayload, at},
		{"ErrWrongVersion", specSecret, specHeader("v2," + specSignature[3:]), specPayload, at},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.ErrorIs(t, Verify(tc.secret, tc.header, []byte(tc.payload), tc.now, DefaultTolerance), ErrBadSignature)
		})
	}
	t.Run("ErrBadSecrets", func(t *testing.T) {
		t.Parallel()
		for _, secret := range []string{"", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_AAAA", "whsec_" + string(make([]byte, 0))} {
			_, err := NewSigner(secret)
			require.Error(t, err, secret)
		}
	})
}
