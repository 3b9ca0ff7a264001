package api

import (
	"fmt"
	"net/http"
)

// HeaderPushHop marks a request made by push (webhook) delivery: the push
// dispatcher (server/push) sets it to 1 on every request, and a relay that
// forwards a pushed request on should keep it (adding one). The send
// endpoint refuses every request that carries it, whatever its value, with
// 508 push-loop: a push endpoint pointed at a gateway's send endpoint —
// this gateway's, another one's, or through a relay that keeps the header
// — stores nothing, so the push sees a failure, nacks, and the message
// walks its retry ladder into the DLQ instead of being stored and pushed
// again without end. Receivers other than mqgate ignore the header.
const HeaderPushHop = "X-Mqgate-Push-Hop"

// refusePushHop refuses a request carrying HeaderPushHop (even empty)
// before its body is read.
func refusePushHop(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hops := r.Header[HeaderPushHop]; len(hops) > 0 {
			WriteError(w, r, fmt.Errorf("%w: the request carries %s: %q, so it was made by push delivery; "+
				"a pushed message is never stored again: point the group's push url at a receiver, not at a gateway's send endpoint",
				ErrPushLoop, HeaderPushHop, hops[0]))
			return
		}
		next.ServeHTTP(w, r)
	})
}
