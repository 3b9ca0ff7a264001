package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// maxRetryMaxTimes bounds a group's retryMaxTimes; the broker applies its own.
const maxRetryMaxTimes = 1000

// Subscription is one topic a group consumes.
type Subscription struct {
	// Topic is the subscribed topic.
	Topic string `json:"topic" example:"orders"`
	// TagExpression filters by tag: "*" (default) or "a || b".
	TagExpression string `json:"tagExpression,omitempty" example:"*"`
	// SQL filters by properties: an SQL92 expression (RocketMQ's MessageSelector.bySql) over the message's
	// properties and TAGS, its tag. Comparisons = <> < <= > >=, [NOT] BETWEEN x AND y, [NOT] IN ('a', 'b'),
	// IS [NOT] NULL, AND, OR, NOT and parentheses; literals 'text' ('' for a quote), 42, -1.5, 2e3, TRUE,
	// FALSE. A property compared with a number is read as one; a missing property is NULL, which matches no
	// comparison; a message matches only when the expression is true. With tagExpression too, a message
	// must pass both. Keywords are case-insensitive, property names are not: a property sent as an
	// X-Mqgate-Property-<name> header has a lower-case name (X-Mqgate-Property-Source is source). At most
	// 4096 bytes.
	SQL string `json:"sql,omitempty" example:"region = 'eu' AND amount > 100"`
} //	@name	Subscription

// GroupRequest creates or updates a consumer group. Every field is optional.
type GroupRequest struct {
	// ConsumeMode is "clustering" (default: members share the work) or "broadcasting" (each consumer instance,
	// named by X-Mqgate-Client-Id, gets every message, with offsets, leases and retries of its own).
	ConsumeMode string `json:"consumeMode,omitempty" enums:"clustering,broadcasting" example:"clustering"`
	// Orderly delivers at most one message per sharding key at a time.
	Orderly bool `json:"orderly,omitempty" example:"false"`
	// RetryMaxTimes is how many retries a message gets before the dead-letter queue (0 = default 16).
	RetryMaxTimes int `json:"retryMaxTimes,omitempty" minimum:"0" maximum:"1000" example:"16"`
	// InvisibleMs is the default lease length of a pull (0 = the server's default lease, 30 s).
	InvisibleMs int64 `json:"invisibleMs,omitempty" minimum:"0" maximum:"43200000" example:"30000"`
	// Subscriptions are the topics the group consumes.
	Subscriptions []Subscription `json:"subscriptions,omitempty"`
	// Push makes the gateway POST the group's messages to a webhook endpoint (absent or null: none).
	Push *PushRequest `json:"push,omitempty"`
	// ConsumeFrom is where the group starts in each queue of a topic it subscribes to and has no offset for, set
	// when the subscription is created (with the group, or added later): "first" (default: the first retained
	// message), "last" (skip the backlog stored until then; what is sent after is delivered) or an RFC 3339 time
	// (the first message stored at or after it). Changing it later moves no offset (use reset-offset); it applies
	// to subscriptions added from then on. A queue added to the topic later starts at its first message.
	ConsumeFrom string `json:"consumeFrom,omitempty" example:"last"`
	// RetryPolicy is the delay before each retry of a failed delivery (a nack without delayLevel or delayMs, an
	// expired lease); absent or null: "levels", RocketMQ's ladder (the first retry at level 3, 10 s, then one
	// level further per retry). "exponential" waits initialMs * 2^(attempt-1), capped at maxMs; "fixed" waits
	// initialMs every time; jitter (0..1) then spreads each delay uniformly by up to that fraction of itself, up or
	// down. No delay exceeds 2 h. retryMaxTimes still bounds the attempts, then the dead-letter queue.
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`
	// InstanceIdleMs is, for a broadcasting group, how long a consumer instance may make no request before it is
	// forgotten with its offsets (0 = default 86400000, 24 h); back, it starts again by consumeFrom.
	InstanceIdleMs int64 `json:"instanceIdleMs,omitempty" minimum:"0" maximum:"31622400000" example:"86400000"`
} //	@name	GroupRequest

// RetryPolicy is a group's backoff between failed deliveries. "levels" (default) is RocketMQ's ladder: the first
// retry at level 3 (10 s), then one level further per retry (2 h at most). "exponential" waits
// initialMs * 2^(attempt-1), capped at maxMs; "fixed" waits initialMs every time. jitter (0..1) then spreads each
// delay uniformly over +/- that fraction of itself (maxMs caps the delay before jitter; no delay exceeds 2 h).
// retryMaxTimes still bounds the attempts, then the dead-letter queue. A nack's delayLevel or delayMs overrides the
// policy for that retry.
type RetryPolicy struct {
	Backoff string `json:"backoff" enums:"levels,exponential,fixed" example:"exponential"`
	// InitialMs is the first delay (exponential) or every delay (fixed); required by both, not allowed with levels.
	InitialMs int64 `json:"initialMs,omitempty" minimum:"1" maximum:"7200000" example:"1000"`
	// MaxMs caps the delay before jitter (default and at most 7200000); at least initialMs.
	MaxMs int64 `json:"maxMs,omitempty" minimum:"1" maximum:"7200000" example:"60000"`
	// Jitter is the fraction (0..1) each delay is spread by, up or down.
	Jitter float64 `json:"jitter,omitempty" minimum:"0" maximum:"1" example:"0.2"`
} //	@name	RetryPolicy

// PushRequest configures a group's webhook (push) endpoint. The gateway POSTs every message of the group's
// subscribed topics to url, signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature).
// A 2xx answer acks the message; any other status, a timeout or a refused connection nacks it (the group's
// retry ladder, then its dead-letter queue): `Retry-After` or `X-Mqgate-Delay-Level` in the answer picks the
// delay level, and 410 Gone also disables the endpoint. Redirects are not followed.
type PushRequest struct {
	// URL is the http or https endpoint.
	URL string `json:"url" example:"https://hooks.example.com/mqgate"`
	// Secret is the signing secret, "whsec_" + base64 of 24-64 bytes. Leave it out to keep the group's
	// current secret, or, for a new endpoint, to have one generated and returned once in this response.
	Secret string `json:"secret,omitempty" example:"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`
	// Mode is the request body: "json" (default: the message as pull returns it, without receipt) or
	// "binary" (the raw body; metadata in X-Mqgate-* headers).
	Mode string `json:"mode,omitempty" enums:"json,binary" example:"json"`
	// MaxConcurrency bounds the requests in flight to the endpoint (0 = default 8).
	MaxConcurrency int `json:"maxConcurrency,omitempty" minimum:"0" maximum:"256" example:"8"`
	// TimeoutMs bounds one request (0 = default 15000).
	TimeoutMs int64 `json:"timeoutMs,omitempty" minimum:"0" maximum:"60000" example:"15000"`
	// Disabled pauses delivery; a PUT without it (re-)enables the endpoint.
	Disabled bool `json:"disabled,omitempty" example:"false"`
} //	@name	PushRequest

// Push is a group's webhook endpoint. The secret is only shown by the PUT that generated it.
type Push struct {
	// URL is the endpoint, with credentials redacted: user info and the values of query parameters named like
	// token, key, secret, signature, sig, password or auth read REDACTED. A PUT or PATCH that sends REDACTED
	// back for such a parameter keeps its stored value.
	URL string `json:"url" example:"https://hooks.example.com/mqgate?token=REDACTED"`
	// URLRedacted is true when url has redacted parts.
	URLRedacted bool `json:"urlRedacted,omitempty" example:"true"`
	// Secret is present only in the response of the PUT that generated it.
	Secret         string `json:"secret,omitempty" example:"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"`
	Mode           string `json:"mode" enums:"json,binary" example:"json"`
	MaxConcurrency int    `json:"maxConcurrency" example:"8"`
	TimeoutMs      int64  `json:"timeoutMs" example:"15000"`
	// Disabled: delivery is paused (by an admin, or by a 410 Gone answer).
	Disabled bool `json:"disabled" example:"false"`
	// DisabledReason says why delivery is paused.
	DisabledReason string `json:"disabledReason,omitempty" example:"endpoint answered 410 Gone"`
} //	@name	Push

// Group describes a consumer group.
type Group struct {
	Name          string         `json:"name" example:"billing"`
	ConsumeMode   string         `json:"consumeMode" enums:"clustering,broadcasting" example:"clustering"`
	Orderly       bool           `json:"orderly" example:"false"`
	RetryMaxTimes int            `json:"retryMaxTimes" example:"16"`
	InvisibleMs   int64          `json:"invisibleMs" example:"30000"`
	Subscriptions []Subscription `json:"subscriptions"`
	// Push is the group's webhook endpoint, if any.
	Push *Push `json:"push,omitempty"`
	// ConsumeFrom is "first", "last" or an RFC 3339 time (see GroupRequest).
	ConsumeFrom string      `json:"consumeFrom" example:"first"`
	RetryPolicy RetryPolicy `json:"retryPolicy"`
	// InstanceIdleMs is how long a broadcasting group's consumer instance may stay idle before it is forgotten.
	InstanceIdleMs int64  `json:"instanceIdleMs" example:"86400000"`
	CreatedAt      string `json:"createdAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
} //	@name	Group

// GroupList lists consumer groups.
type GroupList struct {
	Groups []Group `json:"groups"`
} //	@name	GroupList

// registerGroupRoutes registers group administration and offsets.
func (h *handler) registerGroupRoutes(r chi.Router) {
	// GET /v1/groups — list groups.
	r.Get("/groups", h.listGroups)
	// GET /v1/groups/{group} — one group.
	r.Get("/groups/{group}", h.getGroup)
	// DELETE /v1/groups/{group} — delete a group.
	r.Delete("/groups/{group}", h.deleteGroup)
	// GET /v1/groups/{group}/offsets — committed offsets.
	r.Get("/groups/{group}/offsets", h.getOffsets)
	// GET /v1/groups/{group}/progress — per-queue lag.
	r.Get("/groups/{group}/progress", h.progress)
	// PATCH /v1/groups/{group} — change some fields of a group (JSON merge patch).
	r.With(bodyLimit(smallBodyLimit), requireMergePatch).Patch("/groups/{group}", h.patchGroup)
	r.Group(func(r chi.Router) {
		r.Use(bodyLimit(smallBodyLimit), requireJSON)
		// PUT /v1/groups/{group} — create or replace a group.
		r.Put("/groups/{group}", h.putGroup)
		// PUT /v1/groups/{group}/offsets — commit offsets.
		r.Put("/groups/{group}/offsets", h.commitOffsets)
		// POST /v1/groups/{group}/reset-offset — move offsets by time.
		r.Post("/groups/{group}/reset-offset", h.resetOffset)
	})
}

// listGroups lists consumer groups.
//
//	@Summary	List groups
//	@ID			listGroups
//	@Tags		groups
//	@Produce	json
//	@Produce	application/problem+json
//	@Success	200	{object}	GroupList
//	@Failure	500	{object}	Problem	"internal"
//	@Failure	503	{object}	Problem	"shutting-down"
//	@Router		/groups [get]
func (h *handler) listGroups(w http.ResponseWriter, r *http.Request) {
	groups, err := h.deps.Broker.ListGroups(r.Context())
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := GroupList{Groups: make([]Group, 0, len(groups))}
	for _, g := range groups {
		resp.Groups = append(resp.Groups, toGroup(g))
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// getGroup returns one consumer group.
//
//	@Summary	Get a group
//	@ID			getGroup
//	@Tags		groups
//	@Produce	json
//	@Produce	application/problem+json
//	@Param		group	path		string	true	"Group name"
//	@Success	200		{object}	Group
//	@Failure	400		{object}	Problem	"invalid-name"
//	@Failure	404		{object}	Problem	"group-not-found"
//	@Failure	500		{object}	Problem	"internal"
//	@Failure	503		{object}	Problem	"shutting-down"
//	@Router		/groups/{group} [get]
func (h *handler) getGroup(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	g, err := h.deps.Broker.GetGroup(r.Context(), name)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toGroup(g))
}

// putGroup creates or replaces a consumer group.
//
//	@Summary		Create or replace a group
//	@ID				putGroup
//	@Description	Creates the group (201) or replaces its settings (200): PUT replaces the whole group, a field left out takes its default (use PATCH to change single fields). An empty body takes the defaults. A subscription's `tagExpression` and `sql` filter what the group's pulls (and push deliveries) get; a message either filter refuses counts as consumed for the group.
//	@Description	With `push` the gateway delivers the group's messages to a webhook (see PushRequest); a PUT without `push` removes the endpoint. When `push.secret` is left out the group keeps its current secret, or a new one is generated and returned in this response only.
//	@Tags			groups
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string			true	"Group name"
//	@Param			request	body		GroupRequest	false	"Group settings"
//	@Success		200		{object}	Group			"updated"
//	@Success		201		{object}	Group			"created"
//	@Failure		400		{object}	Problem			"invalid-name, invalid-argument, invalid-sql, malformed-request, value-too-long"
//	@Failure		404		{object}	Problem			"topic-not-found"
//	@Failure		409		{object}	Problem			"quota-exceeded (groups, pushEndpoints)"
//	@Failure		413		{object}	Problem			"body-too-large"
//	@Failure		415		{object}	Problem			"unsupported-media-type"
//	@Failure		500		{object}	Problem			"internal"
//	@Failure		503		{object}	Problem			"storage-read-only, shutting-down"
//	@Router			/groups/{group} [put]
func (h *handler) putGroup(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req GroupRequest
	if err := readJSON(r, &req, true); err != nil {
		WriteError(w, r, err)
		return
	}
	cfg, err := groupConfig(name, req)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var prev *broker.PushConfig
	if cfg.Push != nil && (cfg.Push.Secret == "" || strings.Contains(cfg.Push.URL, Redacted)) {
		// An update without a secret keeps the endpoint's current one, and
		// redacted URL parts keep their stored values.
		old, err := h.deps.Broker.GetGroup(r.Context(), name)
		if err != nil && !errors.Is(err, broker.ErrGroupNotFound) {
			WriteError(w, r, err)
			return
		}
		if old.Push != nil {
			cfg.Push.URL = restoreRedacted(cfg.Push.URL, old.Push.URL)
		}
		if cfg.Push.Secret == "" {
			prev = old.Push
		}
	}
	generated, err := broker.NormalizePush(&cfg, prev)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	g, created, err := h.deps.Broker.PutGroup(r.Context(), cfg)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/groups/"+url.PathEscape(g.Name))
	}
	resp := toGroup(g)
	if generated && resp.Push != nil && g.Push != nil {
		resp.Push.Secret = g.Push.Secret // shown once, never by a GET
	}
	writeJSON(w, r, status, resp)
}

// patchGroup changes some settings of a consumer group.
//
//	@Summary		Change a group's settings
//	@ID				patchGroup
//	@Description	A JSON merge patch (RFC 7396) of the group's settings (GroupRequest): the fields given replace the group's, null removes a field (`push: null` removes the endpoint) and resets it to its default, the others stay. `subscriptions` is an array, so a patch replaces the whole list. `push` merges member by member; its secret is write-only: a patch that does not name `push.secret` keeps it (a new endpoint without one gets a generated secret, returned in this response only). The result is validated like a PUT. Content-Type application/merge-patch+json (or application/json).
//	@Tags			groups
//	@Accept			json
//	@Accept			application/merge-patch+json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string			true	"Group name"
//	@Param			request	body		GroupRequest	true	"The fields to change"
//	@Success		200		{object}	Group
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, invalid-sql, malformed-request, value-too-long"
//	@Failure		404		{object}	Problem	"group-not-found"
//	@Failure		409		{object}	Problem	"quota-exceeded (pushEndpoints)"
//	@Failure		413		{object}	Problem	"body-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"storage-read-only, shutting-down"
//	@Router			/groups/{group} [patch]
func (h *handler) patchGroup(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	patch, err := readMergePatch(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var generated bool
	g, err := h.deps.Broker.PatchGroup(r.Context(), name, func(cur broker.GroupConfig) (broker.GroupConfig, error) {
		var req GroupRequest
		if err := applyMergePatch(groupRequestOf(cur), patch, &req); err != nil {
			return cur, err
		}
		cfg, err := groupConfig(name, req)
		if err != nil {
			return cur, err
		}
		if p := cur.Push; p != nil && p.Disabled && cfg.Push != nil && cfg.Push.Disabled {
			cfg.Push.DisabledReason = p.DisabledReason // still disabled, for the same reason
		}
		if cur.Push != nil && cfg.Push != nil {
			cfg.Push.URL = restoreRedacted(cfg.Push.URL, cur.Push.URL)
		}
		generated, err = broker.NormalizePush(&cfg, cur.Push)
		return cfg, err
	})
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := toGroup(g)
	if generated && resp.Push != nil && g.Push != nil {
		resp.Push.Secret = g.Push.Secret // shown once, never by a GET
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// groupRequestOf is the PUT request that would give g (without the push
// secret, which is write-only): the document a PATCH merges into.
func groupRequestOf(g broker.GroupConfig) GroupRequest {
	req := GroupRequest{
		ConsumeMode:   g.ConsumeMode,
		Orderly:       g.Orderly,
		RetryMaxTimes: g.RetryMaxTimes,
		InvisibleMs:   g.Invisible.Milliseconds(),
	}
	for _, s := range g.Subscriptions {
		req.Subscriptions = append(req.Subscriptions, Subscription{Topic: s.Topic, TagExpression: s.TagExpression, SQL: s.SQL})
	}
	if p := g.Push; p != nil {
		req.Push = &PushRequest{URL: p.URL, Mode: p.Mode, MaxConcurrency: p.MaxConcurrency, TimeoutMs: p.Timeout.Milliseconds(), Disabled: p.Disabled}
	}
	req.ConsumeFrom = g.ConsumeFrom
	req.InstanceIdleMs = g.InstanceIdle.Milliseconds()
	if p := g.RetryPolicy; p != nil {
		rp := toRetryPolicy(p)
		req.RetryPolicy = &rp
	}
	return req
}

// retryPolicyConfig converts a group request's retry policy (the broker
// validates it; the bounds here keep the milliseconds from overflowing).
func retryPolicyConfig(p *RetryPolicy) (*broker.RetryPolicy, error) {
	if p == nil {
		return nil, nil
	}
	limit := broker.MaxRetryDelay.Milliseconds()
	switch {
	case p.InitialMs < 0 || p.InitialMs > limit:
		return nil, invalidArgument("retryPolicy.initialMs %d must be between 1 and %d", p.InitialMs, limit)
	case p.MaxMs < 0 || p.MaxMs > limit:
		return nil, invalidArgument("retryPolicy.maxMs %d must be between 1 and %d", p.MaxMs, limit)
	}
	return &broker.RetryPolicy{Backoff: p.Backoff, Initial: time.Duration(p.InitialMs) * time.Millisecond,
		Max: time.Duration(p.MaxMs) * time.Millisecond, Jitter: p.Jitter}, nil
}

// toRetryPolicy is a group's retry policy in its wire form (nil: levels).
func toRetryPolicy(p *broker.RetryPolicy) RetryPolicy {
	if p == nil {
		return RetryPolicy{Backoff: broker.BackoffLevels}
	}
	return RetryPolicy{Backoff: p.Backoff, InitialMs: p.Initial.Milliseconds(), MaxMs: p.Max.Milliseconds(), Jitter: p.Jitter}
}

// groupConfig validates a group request and converts it.
func groupConfig(name string, req GroupRequest) (broker.GroupConfig, error) {
	switch {
	case req.ConsumeMode != "" && req.ConsumeMode != "clustering" && req.ConsumeMode != "broadcasting":
		return broker.GroupConfig{}, invalidArgument(`consumeMode %s must be "clustering" or "broadcasting"`, broker.QuoteValue(req.ConsumeMode))
	case req.RetryMaxTimes < 0 || req.RetryMaxTimes > maxRetryMaxTimes:
		return broker.GroupConfig{}, invalidArgument("retryMaxTimes %d must be between 0 and %d", req.RetryMaxTimes, maxRetryMaxTimes)
	case req.InvisibleMs < 0 || req.InvisibleMs > MaxInvisibleMs:
		return broker.GroupConfig{}, invalidArgument("invisibleMs %d must be between 0 and %d", req.InvisibleMs, MaxInvisibleMs)
	case req.InstanceIdleMs != 0 && (req.InstanceIdleMs < broker.MinInstanceIdle.Milliseconds() || req.InstanceIdleMs > broker.MaxInstanceIdle.Milliseconds()):
		return broker.GroupConfig{}, invalidArgument("instanceIdleMs %d must be 0 (the default, 24 h) or between %d and %d",
			req.InstanceIdleMs, broker.MinInstanceIdle.Milliseconds(), broker.MaxInstanceIdle.Milliseconds())
	}
	policy, err := retryPolicyConfig(req.RetryPolicy)
	if err != nil {
		return broker.GroupConfig{}, err
	}
	cfg := broker.GroupConfig{
		Name:          name,
		ConsumeMode:   req.ConsumeMode,
		Orderly:       req.Orderly,
		RetryMaxTimes: req.RetryMaxTimes,
		Invisible:     time.Duration(req.InvisibleMs) * time.Millisecond,
		ConsumeFrom:   req.ConsumeFrom,
		RetryPolicy:   policy,
		InstanceIdle:  time.Duration(req.InstanceIdleMs) * time.Millisecond,
	}
	for i, s := range req.Subscriptions {
		if !validName(s.Topic) {
			return broker.GroupConfig{}, fmt.Errorf("%w: subscriptions[%d].topic %s", broker.ErrInvalidName, i, broker.QuoteValue(s.Topic))
		}
		cfg.Subscriptions = append(cfg.Subscriptions, broker.Subscription{Topic: s.Topic, TagExpression: s.TagExpression, SQL: s.SQL})
	}
	if p := req.Push; p != nil {
		switch {
		case p.URL == "":
			return broker.GroupConfig{}, invalidArgument("push.url is required")
		case p.MaxConcurrency < 0 || p.MaxConcurrency > broker.MaxPushConcurrency:
			return broker.GroupConfig{}, invalidArgument("push.maxConcurrency %d must be between 0 and %d", p.MaxConcurrency, broker.MaxPushConcurrency)
		case p.TimeoutMs < 0 || p.TimeoutMs > broker.MaxPushTimeout.Milliseconds():
			return broker.GroupConfig{}, invalidArgument("push.timeoutMs %d must be between 0 and %d", p.TimeoutMs, broker.MaxPushTimeout.Milliseconds())
		}
		cfg.Push = &broker.PushConfig{
			URL:            p.URL,
			Secret:         p.Secret,
			Mode:           p.Mode,
			MaxConcurrency: p.MaxConcurrency,
			Timeout:        time.Duration(p.TimeoutMs) * time.Millisecond,
			Disabled:       p.Disabled,
		}
		if p.Disabled {
			cfg.Push.DisabledReason = "disabled by an administrator"
		}
	}
	return cfg, nil
}

// deleteGroup deletes a consumer group.
//
//	@Summary	Delete a group
//	@ID			deleteGroup
//	@Tags		groups
//	@Produce	application/problem+json
//	@Param		group	path	string	true	"Group name"
//	@Success	204
//	@Failure	400	{object}	Problem	"invalid-name"
//	@Failure	404	{object}	Problem	"group-not-found"
//	@Failure	500	{object}	Problem	"internal"
//	@Failure	503	{object}	Problem	"storage-read-only, shutting-down"
//	@Router		/groups/{group} [delete]
func (h *handler) deleteGroup(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	if err := h.deps.Broker.DeleteGroup(r.Context(), name); err != nil {
		WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// toGroup converts a group to its wire form ("" consume mode is the
// default "clustering").
func toGroup(g broker.GroupConfig) Group {
	if g.ConsumeMode == "" {
		g.ConsumeMode = "clustering"
	}
	out := Group{
		Name:           g.Name,
		ConsumeMode:    g.ConsumeMode,
		Orderly:        g.Orderly,
		RetryMaxTimes:  g.RetryMaxTimes,
		InvisibleMs:    g.Invisible.Milliseconds(),
		Subscriptions:  make([]Subscription, 0, len(g.Subscriptions)),
		ConsumeFrom:    g.ConsumeFrom,
		RetryPolicy:    toRetryPolicy(g.RetryPolicy),
		CreatedAt:      formatTime(g.CreatedAt),
		InstanceIdleMs: g.InstanceIdle.Milliseconds(),
	}
	if out.InstanceIdleMs == 0 {
		out.InstanceIdleMs = broker.DefaultInstanceIdle.Milliseconds()
	}
	if out.ConsumeFrom == "" {
		out.ConsumeFrom = "first"
	}
	for _, s := range g.Subscriptions {
		out.Subscriptions = append(out.Subscriptions, Subscription{Topic: s.Topic, TagExpression: s.TagExpression, SQL: s.SQL})
	}
	if p := g.Push; p != nil {
		shown, redacted := redactURL(p.URL)
		out.Push = &Push{
			URL:            shown,
			URLRedacted:    redacted,
			Mode:           p.Mode,
			MaxConcurrency: p.MaxConcurrency,
			TimeoutMs:      p.Timeout.Milliseconds(),
			Disabled:       p.Disabled,
			DisabledReason: p.DisabledReason,
		}
		if out.Push.Mode == "" {
			out.Push.Mode = "json"
		}
	}
	return out
}
