package sqs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/server/auth"
)

// AWS Signature Version 4, verified against the ACL file's accounts when
// authentication is on (README "SQS API"): the access key id is the
// account's accessKey and the signing secret its secretKey (an account of
// secretKeyHash entries cannot sign: SigV4 is an HMAC keyed by the secret
// itself). A request is refused when its signature does not match, its
// X-Amz-Date is more than maxSkew away from the server's clock, or the
// same signature was already accepted (a replay; remembered until its
// date is maxSkew old). Only the Authorization header form is accepted
// (no presigned URLs).

// maxSkew is how far a request's X-Amz-Date may be from the clock.
const maxSkew = 5 * time.Minute

// maxReplayEntries bounds the replay cache; past it, the oldest half of
// the window is forgotten early.
const maxReplayEntries = 1 << 20

// sigV4 verifies signatures.
type sigV4 struct {
	acl auth.Source
	now func() time.Time

	mu   sync.Mutex
	seen map[string]time.Time // signature → when it may be forgotten
}

func errAuth(shape string, status int, format string, args ...any) *apiError {
	return newError(shape, shape, status, format, args...)
}

// authorizationHeader is a parsed Authorization header.
type authorizationHeader struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

func parseAuthorization(h string) (authorizationHeader, bool) {
	var a authorizationHeader
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return a, false
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return a, false
		}
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" {
				return a, false
			}
			a.accessKey, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	return a, a.accessKey != "" && len(a.signedHeaders) > 0 && a.signature != ""
}

// verify checks r's signature over body and returns the account.
func (v *sigV4) verify(r *http.Request, body []byte) (*auth.Account, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, errAuth("MissingAuthenticationToken", http.StatusForbidden, "Authentication is on: the request must be signed with AWS Signature Version 4.")
	}
	a, ok := parseAuthorization(h)
	if !ok {
		return nil, errAuth("IncompleteSignature", http.StatusForbidden, "The Authorization header is not an AWS4-HMAC-SHA256 signature.")
	}
	amzDate := r.Header.Get("X-Amz-Date")
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, a.date) {
		return nil, errAuth("IncompleteSignature", http.StatusForbidden, "X-Amz-Date is missing or does not match the credential scope's date.")
	}
	now := v.now()
	if d := now.Sub(at); d > maxSkew || d < -maxSkew {
		return nil, errAuth("RequestExpired", http.StatusForbidden, "Signature expired: %s is more than %v away from the server's time %s.", amzDate, maxSkew, now.UTC().Format("20060102T150405Z"))
	}
	if !contains(a.signedHeaders, "host") || (!contains(a.signedHeaders, "x-amz-date")) {
		return nil, errAuth("IncompleteSignature", http.StatusForbidden, "The signed headers must include host and x-amz-date.")
	}
	acl := v.acl.ACL()
	account := acl.Account(a.accessKey)
	if account == nil {
		return nil, errAuth("InvalidClientTokenId", http.StatusForbidden, "The security token included in the request is invalid.")
	}
	if peer, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && !acl.AllowsAddress(account, peer.Addr().Unmap()) {
		return nil, errAuth("AccessDenied", http.StatusForbidden, "The account may not be used from this address.")
	}
	payload := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(payload[:])
	if declared := r.Header.Get("X-Amz-Content-Sha256"); declared != "" && declared != payloadHash {
		return nil, errAuth("SignatureDoesNotMatch", http.StatusForbidden, "X-Amz-Content-Sha256 is not the SHA-256 of the body.")
	}
	canonical := canonicalRequest(r, a.signedHeaders, payloadHash)
	crHash := sha256.Sum256([]byte(canonical))
	scope := strings.Join([]string{a.date, a.region, a.service, "aws4_request"}, "/")
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(crHash[:])
	want, err := hex.DecodeString(a.signature)
	if err != nil {
		return nil, errAuth("SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided.")
	}
	matched := false
	for _, secret := range account.SigningSecrets() {
		key := hmacSHA256([]byte("AWS4"+secret), a.date)
		key = hmacSHA256(key, a.region)
		key = hmacSHA256(key, a.service)
		key = hmacSHA256(key, "aws4_request")
		if hmac.Equal(hmacSHA256(key, toSign), want) {
			matched = true
		}
	}
	if !matched {
		return nil, errAuth("SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided.")
	}
	if !v.remember(a.signature, at.Add(maxSkew), now) {
		return nil, errAuth("AccessDenied", http.StatusForbidden, "This signed request was already received (a replay): sign every request afresh.")
	}
	return account, nil
}

// remember records an accepted signature; false when it was seen before.
func (v *sigV4) remember(sig string, until, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.seen == nil {
		v.seen = map[string]time.Time{}
	}
	if exp, ok := v.seen[sig]; ok && exp.After(now) {
		return false
	}
	if len(v.seen) >= maxReplayEntries {
		for s, exp := range v.seen {
			if exp.Before(now.Add(maxSkew)) { // expired, or in the older half of the window
				delete(v.seen, s)
			}
		}
	}
	v.seen[sig] = until
	return true
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalRequest is SigV4's canonical form of r.
func canonicalRequest(r *http.Request, signed []string, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(awsEscapePath(path) + "\n")
	b.WriteString(canonicalQuery(r.URL.Query()) + "\n")
	for _, name := range signed {
		var value string
		switch name {
		case "host":
			value = r.Host
		case "content-length":
			value = strconv.FormatInt(r.ContentLength, 10)
		default:
			vals := r.Header.Values(name)
			for i, v := range vals {
				vals[i] = strings.Join(strings.Fields(v), " ")
			}
			value = strings.Join(vals, ",")
		}
		b.WriteString(name + ":" + value + "\n")
	}
	b.WriteString("\n" + strings.Join(signed, ";") + "\n" + payloadHash)
	return b.String()
}

// awsEscapePath escapes an (already escaped) path again, as SigV4 does
// for every service but S3.
func awsEscapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = awsEscape(s)
	}
	return strings.Join(segs, "/")
}

// canonicalQuery is the sorted, escaped query string.
func canonicalQuery(q url.Values) string {
	var pairs []string
	for k, vs := range q {
		for _, v := range vs {
			pairs = append(pairs, awsEscape(k)+"="+awsEscape(v))
		}
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

// awsEscape is SigV4's URI encoding: everything but A-Za-z0-9-_.~ as %XX.
func awsEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return b.String()
}
