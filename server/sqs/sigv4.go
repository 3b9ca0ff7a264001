package sqs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
// itself). Two forms are accepted:
//
//   - the Authorization header (what the SDKs and the CLI send), with
//     X-Amz-Date among the signed headers;
//   - a presigned URL (query-string authentication: X-Amz-Algorithm,
//     X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders and
//     X-Amz-Signature in the query, as the SDKs' PresignHTTP writes them),
//     for a GET or a POST of either protocol. The signature covers every
//     other query parameter and the body's SHA-256 (UNSIGNED-PAYLOAD is
//     refused: the URL's holder could otherwise post any operation).
//     X-Amz-Expires is 1 to 604800 seconds (a week, as AWS); without it
//     the URL is good for maxSkew after its date, like a signed header.
//
// A request is refused when its signature does not match, when its date
// is more than maxSkew ahead of the server's clock, when it is older than
// maxSkew (a header) or than X-Amz-Expires (a presigned URL), or when the
// same signature was already accepted (a replay: a presigned URL is good
// for one request; signatures are remembered until they expire).
//
// Failures that guess at a secret — a signature that does not match or
// does not parse, an unknown access key — are counted by the server's
// auth failure limiter (Options.Failures, the one that slows HTTP Basic
// and bearer guessers per account and address): over its limit they are
// answered late with RequestThrottled. Right signatures never reach it.

// maxSkew is how far a request's X-Amz-Date may be from the clock.
const maxSkew = 5 * time.Minute

// maxPresignExpiry is the longest X-Amz-Expires (AWS's: a week).
const maxPresignExpiry = 7 * 24 * time.Hour

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

// signature is a parsed signature, from the Authorization header or the
// query.
type signature struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
	// amzDate is X-Amz-Date; expires is how long after it the signature
	// is good.
	amzDate string
	expires time.Duration
	// presigned: the signature is in the query.
	presigned bool
}

// parseCredential splits a credential scope
// (<key>/<date>/<region>/<service>/aws4_request) into s.
func (s *signature) parseCredential(v string) bool {
	f := strings.Split(v, "/")
	if len(f) != 5 || f[4] != "aws4_request" {
		return false
	}
	s.accessKey, s.date, s.region, s.service = f[0], f[1], f[2], f[3]
	return true
}

func parseAuthorization(h string) (signature, bool) {
	a := signature{expires: maxSkew}
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
			if !a.parseCredential(v) {
				return a, false
			}
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			a.signature = v
		}
	}
	return a, a.accessKey != "" && len(a.signedHeaders) > 0 && a.signature != ""
}

// Query parameters of a presigned URL.
const (
	queryAlgorithm     = "X-Amz-Algorithm"
	queryCredential    = "X-Amz-Credential"
	queryDate          = "X-Amz-Date"
	queryExpires       = "X-Amz-Expires"
	querySignedHeaders = "X-Amz-SignedHeaders"
	querySignature     = "X-Amz-Signature"
)

// isPresigned reports whether q carries a presigned URL's signature.
func isPresigned(q url.Values) bool {
	return q.Has(queryAlgorithm) || q.Has(querySignature) || q.Has(queryCredential)
}

// parsePresigned reads a presigned URL's signature from q; the message
// says what is wrong.
func parsePresigned(q url.Values) (signature, string) {
	s := signature{presigned: true, expires: maxSkew}
	for _, k := range []string{queryAlgorithm, queryCredential, queryDate, querySignedHeaders, querySignature, queryExpires} {
		if len(q[k]) > 1 {
			return s, k + " is given more than once."
		}
	}
	if q.Get(queryAlgorithm) != "AWS4-HMAC-SHA256" {
		return s, "X-Amz-Algorithm must be AWS4-HMAC-SHA256."
	}
	if !s.parseCredential(q.Get(queryCredential)) || s.accessKey == "" {
		return s, "X-Amz-Credential must be <access key>/<date>/<region>/<service>/aws4_request."
	}
	if s.signedHeaders = strings.Split(q.Get(querySignedHeaders), ";"); q.Get(querySignedHeaders) == "" {
		return s, "X-Amz-SignedHeaders is missing."
	}
	if s.signature = q.Get(querySignature); s.signature == "" {
		return s, "X-Amz-Signature is missing."
	}
	s.amzDate = q.Get(queryDate)
	if e, ok := q[queryExpires]; ok {
		n, err := strconv.ParseInt(e[0], 10, 64)
		if err != nil || n < 1 || n > int64(maxPresignExpiry/time.Second) {
			return s, fmt.Sprintf("X-Amz-Expires must be a number of seconds from 1 to %d.", int64(maxPresignExpiry/time.Second))
		}
		s.expires = time.Duration(n) * time.Second
	}
	return s, ""
}

// sigFailure is a refused signature: the error to answer and what the
// server's failure limiter makes of it (0: nothing).
type sigFailure struct {
	err       *apiError
	accessKey string
	count     auth.SignatureFailure
}

func (f *sigFailure) Error() string { return f.err.Error() }

func refuse(count auth.SignatureFailure, accessKey string, e *apiError) *sigFailure {
	return &sigFailure{err: e, accessKey: accessKey, count: count}
}

var errSignatureMismatch = errAuth("SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided.")

// verify checks r's signature over body and returns the account.
func (v *sigV4) verify(r *http.Request, body []byte) (*auth.Account, *sigFailure) {
	h := r.Header.Get("Authorization")
	query := r.URL.Query()
	var a signature
	switch {
	case h != "" && isPresigned(query):
		return nil, refuse(auth.SignatureMalformed, "", errAuth("IncompleteSignature", http.StatusForbidden,
			"Only one authentication method is allowed: an Authorization header or a presigned URL, not both."))
	case isPresigned(query):
		var why string
		if a, why = parsePresigned(query); why != "" {
			return nil, refuse(auth.SignatureMalformed, "", errAuth("IncompleteSignature", http.StatusForbidden, "%s", why))
		}
		delete(query, querySignature) // the signature covers the others
	case h != "":
		var ok bool
		if a, ok = parseAuthorization(h); !ok {
			return nil, refuse(auth.SignatureMalformed, "", errAuth("IncompleteSignature", http.StatusForbidden, "The Authorization header is not an AWS4-HMAC-SHA256 signature."))
		}
		a.amzDate = r.Header.Get("X-Amz-Date")
	default:
		return nil, refuse(auth.SignatureMissing, "", errAuth("MissingAuthenticationToken", http.StatusForbidden,
			"Authentication is on: the request must be signed with AWS Signature Version 4 (an Authorization header or a presigned URL)."))
	}
	at, err := time.Parse("20060102T150405Z", a.amzDate)
	if err != nil || !strings.HasPrefix(a.amzDate, a.date) {
		return nil, refuse(auth.SignatureMalformed, "", errAuth("IncompleteSignature", http.StatusForbidden, "X-Amz-Date is missing or does not match the credential scope's date."))
	}
	now := v.now()
	switch {
	case at.Sub(now) > maxSkew:
		return nil, refuse(0, "", errAuth("RequestExpired", http.StatusForbidden, "Signature not yet valid: %s is more than %v ahead of the server's time %s.", a.amzDate, maxSkew, now.UTC().Format("20060102T150405Z")))
	case now.Sub(at) > a.expires && a.presigned:
		return nil, refuse(0, "", errAuth("RequestExpired", http.StatusForbidden, "Request has expired: signed at %s for %v; the server's time is %s.", a.amzDate, a.expires, now.UTC().Format("20060102T150405Z")))
	case now.Sub(at) > a.expires:
		return nil, refuse(0, "", errAuth("RequestExpired", http.StatusForbidden, "Signature expired: %s is more than %v away from the server's time %s.", a.amzDate, maxSkew, now.UTC().Format("20060102T150405Z")))
	}
	if !contains(a.signedHeaders, "host") || (!a.presigned && !contains(a.signedHeaders, "x-amz-date")) {
		return nil, refuse(auth.SignatureMalformed, "", errAuth("IncompleteSignature", http.StatusForbidden, "The signed headers must include host and (in an Authorization header) x-amz-date."))
	}
	// X-Amz-Target picks the operation: unsigned, it would let whoever
	// holds a signed request (a presigned URL) run another one on the
	// same input.
	if r.Header.Get("X-Amz-Target") != "" && !contains(a.signedHeaders, "x-amz-target") {
		return nil, refuse(auth.SignatureMalformed, "", errAuth("IncompleteSignature", http.StatusForbidden, "X-Amz-Target must be among the signed headers."))
	}
	acl := v.acl.ACL()
	account := acl.Account(a.accessKey)
	if account == nil {
		return nil, refuse(auth.SignatureMismatch, a.accessKey, errAuth("InvalidClientTokenId", http.StatusForbidden, "The security token included in the request is invalid."))
	}
	if peer, err := netip.ParseAddrPort(r.RemoteAddr); err == nil && !acl.AllowsAddress(account, peer.Addr().Unmap()) {
		return nil, refuse(auth.SignatureAddress, a.accessKey, errAuth("AccessDenied", http.StatusForbidden, "The account may not be used from this address."))
	}
	payload := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(payload[:])
	if declared := r.Header.Get("X-Amz-Content-Sha256"); declared != "" && declared != payloadHash {
		return nil, refuse(auth.SignatureMismatch, a.accessKey, errAuth("SignatureDoesNotMatch", http.StatusForbidden, "X-Amz-Content-Sha256 is not the SHA-256 of the body."))
	}
	canonical := canonicalRequest(r, query, a.signedHeaders, payloadHash)
	crHash := sha256.Sum256([]byte(canonical))
	scope := strings.Join([]string{a.date, a.region, a.service, "aws4_request"}, "/")
	toSign := "AWS4-HMAC-SHA256\n" + a.amzDate + "\n" + scope + "\n" + hex.EncodeToString(crHash[:])
	want, err := hex.DecodeString(a.signature)
	if err != nil {
		return nil, refuse(auth.SignatureMismatch, a.accessKey, errSignatureMismatch)
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
		return nil, refuse(auth.SignatureMismatch, a.accessKey, errSignatureMismatch)
	}
	if !v.remember(a.signature, at.Add(max(a.expires, maxSkew)), now) {
		return nil, refuse(0, a.accessKey, errAuth("AccessDenied", http.StatusForbidden, "This signed request was already received (a replay): sign every request afresh; a presigned URL is good for one request."))
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
		// Long-lived presigned URLs may still fill it: forget any, down
		// to three quarters (the table stays bounded; a forgotten URL
		// could be used once more until it expires).
		for s := range v.seen {
			if len(v.seen) < maxReplayEntries*3/4 {
				break
			}
			delete(v.seen, s)
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

// canonicalRequest is SigV4's canonical form of r with the query
// parameters query.
func canonicalRequest(r *http.Request, query url.Values, signed []string, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n")
	path := r.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(awsEscapePath(path) + "\n")
	b.WriteString(canonicalQuery(query) + "\n")
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
