package api

import (
	"net/url"
	"strings"
)

// Push endpoint URLs are shown redacted: a receiver's URL often carries a
// credential of its own (a token or signature in the query, a SAS or
// pre-signed URL), and whoever may read a group's configuration may not
// necessarily call the receiver. User info is replaced, and so is the
// value of every query parameter whose name looks like a credential
// (sensitiveParamWords); the rest of the URL stays as it is, so that it
// still says where the messages go. A redacted value reads Redacted, and
// the group's urlRedacted is true.
//
// A PUT or PATCH that sends a URL back with Redacted values (a client that
// read the group, changed something and wrote it back) keeps the stored
// values of those parameters: like the push secret, they are write-only.

// Redacted replaces a credential in a push URL shown by the API.
const Redacted = "REDACTED"

// sensitiveParamWords are the words of query parameter names whose values
// are hidden: a name is split at '-', '_' and '.' (and lower-cased), and
// one matching word is enough (access_token, X-Amz-Signature, api_key,
// sig, client_secret, hmac).
var sensitiveParamWords = map[string]bool{
	"token": true, "key": true, "apikey": true, "secret": true, "signature": true, "sig": true,
	"password": true, "passwd": true, "pwd": true, "pass": true, "auth": true, "authorization": true,
	"credential": true, "credentials": true, "jwt": true, "session": true, "hmac": true, "code": true,
	"accesstoken": true, "sessionid": true,
}

// sensitiveParam reports whether a query parameter name looks like it
// holds a credential.
func sensitiveParam(name string) bool {
	for _, word := range strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == '.' }) {
		if sensitiveParamWords[word] {
			return true
		}
	}
	return false
}

// redactURL returns raw with its credentials replaced by Redacted, and
// whether anything was replaced. The query keeps its order and escaping.
func redactURL(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return Redacted, true // not shown at all: it could hold anything
	}
	redacted := false
	if u.User != nil {
		u.User = url.User(Redacted)
		redacted = true
	}
	if u.RawQuery != "" {
		pairs := strings.Split(u.RawQuery, "&")
		for i, pair := range pairs {
			name, _, hasValue := strings.Cut(pair, "=")
			unescaped, err := url.QueryUnescape(name)
			if err != nil {
				unescaped = name
			}
			if hasValue && sensitiveParam(unescaped) {
				pairs[i] = name + "=" + Redacted
				redacted = true
			}
		}
		u.RawQuery = strings.Join(pairs, "&")
	}
	return u.String(), redacted
}

// restoreRedacted returns next with every query parameter whose value is
// Redacted given the value the same parameter has in stored (the URL in
// force), when next and stored name the same endpoint (scheme, host and
// path). Anything else is returned unchanged.
func restoreRedacted(next, stored string) string {
	if !strings.Contains(next, Redacted) || stored == "" {
		return next
	}
	n, err1 := url.Parse(next)
	s, err2 := url.Parse(stored)
	if err1 != nil || err2 != nil || n.Scheme != s.Scheme || n.Host != s.Host || n.EscapedPath() != s.EscapedPath() {
		return next
	}
	storedValues := map[string][]string{}
	for _, pair := range strings.Split(s.RawQuery, "&") {
		name, value, _ := strings.Cut(pair, "=")
		storedValues[name] = append(storedValues[name], value)
	}
	used := map[string]int{}
	pairs := strings.Split(n.RawQuery, "&")
	for i, pair := range pairs {
		name, value, _ := strings.Cut(pair, "=")
		if value != Redacted {
			continue
		}
		if vs := storedValues[name]; used[name] < len(vs) {
			pairs[i] = name + "=" + vs[used[name]]
			used[name]++
		}
	}
	n.RawQuery = strings.Join(pairs, "&")
	return n.String()
}
