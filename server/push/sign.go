package push

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/server/broker"
)

// Standard Webhooks v1 (symmetric): the signed content is
// "{webhook-id}.{webhook-timestamp}.{body}" over the raw body, the MAC is
// HMAC-SHA256 keyed with the base64-decoded part of "whsec_<base64>", and
// webhook-signature carries "v1,<base64 MAC>" (a space-separated list of
// such entries lets a sender rotate keys).

// Header names of Standard Webhooks.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far a webhook-timestamp may be from the
// verifier's clock (the Standard Webhooks libraries' 5 minutes).
const DefaultTolerance = 5 * time.Minute

// Signer signs webhook requests with one secret.
type Signer struct{ key []byte }

// NewSigner returns a signer for a "whsec_<base64>" secret.
func NewSigner(secret string) (*Signer, error) {
	key, err := broker.PushSecretKey(secret)
	if err != nil {
		return nil, err
	}
	return &Signer{key: key}, nil
}

// Sign returns the webhook-signature value for a message id, the attempt's
// timestamp (unix seconds) and the raw body.
func (s *Signer) Sign(id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(s.mac(id, timestamp, body))
}

func (s *Signer) mac(id string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, timestamp, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a received webhook as a receiver should: the three
// headers are present, webhook-timestamp is within tolerance of now, and
// one v1 entry of webhook-signature matches (compared in constant time).
func Verify(secret string, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	s, err := NewSigner(secret)
	if err != nil {
		return err
	}
	id, ts, sigs := header.Get(HeaderID), header.Get(HeaderTimestamp), header.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: %s, %s and %s are required", ErrBadSignature, HeaderID, HeaderTimestamp, HeaderSignature)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not unix seconds", ErrBadSignature, HeaderTimestamp, ts)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s is %v away from now", ErrBadSignature, HeaderTimestamp, d.Round(time.Second))
	}
	want := s.mac(id, unix, body)
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrBadSignature)
}
