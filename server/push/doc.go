// Package push delivers the messages of consumer groups that have a push
// (webhook) endpoint: the gateway POSTs each message of the group's
// subscribed topics to the endpoint and settles it by the answer — the
// seed's retry ladder, driven by HTTP status codes.
//
// It drives the broker only through its public methods (the Broker
// interface): a long-polling Pull per (group, topic), then Ack, Nack,
// ChangeLease, and GetGroup/PutGroup to disable an endpoint; a broker
// that is also a PushTracer (trace.go) is told of every delivery's HTTP
// status and result for its message trace. It is a background service
// with Start(ctx)/Stop() and a testable runOnce. A message stored with a
// W3C trace context (its traceparent and tracestate properties, see the
// api package's tracecontext.go) is pushed with those headers.
//
// The files: config.go (Config, its defaults and the Broker interface),
// dispatcher.go (the Dispatcher: start, stop, and runOnce reconciling the
// pullers with the groups' endpoints), puller.go (per (group, topic) long
// polls, one delivery goroutine per message, settling by the answer),
// deliver.go and payload.go (the HTTP POST and its body), sign.go
// (Standard Webhooks signatures), leases.go (in-flight deliveries and
// their lease extension), disable.go (410 Gone), guard.go (the SSRF
// guard), metrics.go, trace.go (the outcomes for the message trace).
//
// # The delivery contract
//
//   - 2xx: the message is acked.
//   - Any other status, a timeout or a failed connection: it is nacked with
//     the status (or the error) as the attempt's reason and walks the
//     group's retry ladder (delay level 3 + reconsumeTimes) into
//     %DLQ%<group> after retryMaxTimes, exactly like a pull consumer's nack.
//     An `X-Mqgate-Delay-Level` answer header (-1 dead-letter now, 0 the
//     ladder, n that level) or a `Retry-After` header (seconds or an HTTP
//     date; the smallest delay level at least that long, the top level
//     when none is) picks the delay instead.
//   - 410 Gone: nacked, and the endpoint is disabled (Disabled and
//     DisabledReason in the group config) until a PUT of the group
//     enables it; messages then wait in the group (a pull consumer may
//     take them meanwhile).
//   - Redirects are not followed: 3xx is a failure.
//   - The SSRF guard (guard.go) refuses endpoints resolving to link-local,
//     cloud-metadata, unspecified, multicast or operator-denied addresses
//     (DenyCIDRs; with DenyPrivate also loopback, private, carrier-grade NAT
//     and unique-local ones), and the gateway's own listeners: nothing is
//     sent and the message is nacked. Config.CheckURL applies the same rules
//     when a group is saved, to literal addresses and localhost names.
//   - Push never feeds a send endpoint: every request carries
//     X-Mqgate-Push-Hop, and mqgate's send endpoint answers a request with
//     it 508 push-loop (package api, loop.go). A push into any gateway's
//     send endpoint — its own behind a name or NAT the guard cannot
//     recognise, another gateway's, or through a relay keeping the header —
//     fails like any other error answer and ends in the DLQ; nothing is
//     stored again, so two groups pushing into each other's topics cannot
//     amplify either.
//   - At most MaxConcurrency (default 8) requests per group are in flight;
//     each has Timeout (default 15 s, at most 60 s). The message stays
//     leased while its request runs, and a slow delivery's lease is
//     extended (ChangeLease), so it is never delivered twice at once.
//   - Delivery is at-least-once: a receiver must de-duplicate by webhook-id.
//
// # The request
//
// POST with the Standard Webhooks v1 headers:
//
//	webhook-id:        the message's originMessageId, or messageId on a
//	                   first delivery: the same for every retry
//	webhook-timestamp: unix seconds of this attempt
//	webhook-signature: v1,<base64 HMAC-SHA256 over "{id}.{timestamp}.{body}">
//	                   keyed with the base64-decoded part of the group's
//	                   "whsec_…" secret
//	X-Mqgate-Group:    the group
//	X-Mqgate-Push-Hop: 1 (a send endpoint refuses pushed requests)
//	User-Agent:        mqgate-push/1
//
// The body depends on the endpoint's mode. "json" (the default) posts
// application/json: the message exactly as the pull API renders it
// (messageId, topic, queueId, queueOffset, reconsumeTimes, originMessageId,
// tag, keys, properties, body, bodyEncoding, bornAt, storedAt), without a
// receipt — the gateway settles the lease itself. "binary" posts the raw
// body as application/octet-stream with the metadata in X-Mqgate-Message-Id,
// -Topic, -Queue-Id, -Queue-Offset, -Reconsume-Times, -Origin-Message-Id,
// -Tag, -Keys (comma-separated), -Property-<name>, -Born-At and -Stored-At
// headers (values that cannot be headers are left out).
package push
