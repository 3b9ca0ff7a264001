package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/auth"
	"github.com/mqgate/mqgate/server/broker"
)

// Bounds the transport checks on admin payloads; the broker applies its own.
const (
	maxQueues       = 1024
	messageIDLength = 32
)

// TopicRequest creates or updates a topic. Every field is optional.
type TopicRequest struct {
	// Queues is the number of queues (default 4).
	Queues int `json:"queues,omitempty" minimum:"0" maximum:"1024" example:"4"`
	// RetentionHours is how long messages are kept (0 = the store default, 72).
	RetentionHours int `json:"retentionHours,omitempty" minimum:"0" example:"72"`
	// Perm is "rw" (default), "r" (no sends) or "w" (no consumption).
	Perm string `json:"perm,omitempty" enums:"rw,r,w" example:"rw"`
} //	@name	TopicRequest

// Topic describes a topic.
type Topic struct {
	Name           string `json:"name" example:"orders"`
	Queues         int    `json:"queues" example:"4"`
	RetentionHours int    `json:"retentionHours" example:"72"`
	Perm           string `json:"perm" enums:"rw,r,w" example:"rw"`
	CreatedAt      string `json:"createdAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
} //	@name	Topic

// TopicList lists topics.
type TopicList struct {
	Topics []Topic `json:"topics"`
} //	@name	TopicList

// TopicStatus is what the store holds of a topic, per queue (mqadmin
// topicStatus).
type TopicStatus struct {
	Topic  string        `json:"topic" example:"orders"`
	Queues []QueueStatus `json:"queues"`
	// Messages adds up maxOffset - minOffset of the queues: the messages
	// the topic retains.
	Messages int64 `json:"messages" example:"120"`
} //	@name	TopicStatus

// QueueStatus is one queue of a topic.
type QueueStatus struct {
	QueueID int32 `json:"queueId" example:"0"`
	// MinOffset is the offset of the first message retention kept.
	MinOffset int64 `json:"minOffset" example:"0"`
	// MaxOffset is the offset the next message stored in the queue gets.
	MaxOffset int64 `json:"maxOffset" example:"30"`
	// LastStoredAt is the store time of the queue's newest message; absent when it holds none.
	LastStoredAt string `json:"lastStoredAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
} //	@name	QueueStatus

// MessageList lists messages.
type MessageList struct {
	Messages []Message `json:"messages"`
} //	@name	MessageList

// QueueMessages is a batch read from one queue by offset.
type QueueMessages struct {
	Messages []Message `json:"messages"`
	// NextOffset is the offset to read next.
	NextOffset int64 `json:"nextOffset" example:"74"`
} //	@name	QueueMessages

// BrokerStatus is the broker's state (mqadmin brokerStatus).
type BrokerStatus struct {
	// StoreID names this store in every message id (the id's first 16 hex digits):
	// chosen when the data directory was first written, kept by its log.
	StoreID            string `json:"storeId" example:"8F3A51C2D4E6F701"`
	FlushMode          string `json:"flushMode" enums:"sync,async" example:"sync"`
	StoreBytes         int64  `json:"storeBytes" example:"1073741824"`
	UptimeMs           int64  `json:"uptimeMs" example:"3600000"`
	CommitLogMinOffset int64  `json:"commitLogMinOffset" example:"0"`
	CommitLogMaxOffset int64  `json:"commitLogMaxOffset" example:"123456"`
	// Levels is the delay scheduler per level (RocketMQ's scheduleMessageOffset).
	Levels []DelayLevel `json:"delayLevels"`
	// ScheduledTotal counts messages the scheduler delivered since start.
	ScheduledTotal uint64 `json:"scheduledTotal" example:"1200"`
	// Lateness of recent scheduler deliveries, in milliseconds.
	LatenessP50Ms float64 `json:"schedulerLatenessP50Ms" example:"1.5"`
	LatenessP99Ms float64 `json:"schedulerLatenessP99Ms" example:"12"`
	LatenessMaxMs float64 `json:"schedulerLatenessMaxMs" example:"40"`
	// TimersPending counts delayMs/deliverAt timers not yet due.
	TimersPending int `json:"timersPending" example:"3"`
	// NextTimerAt is when the soonest timer fires.
	NextTimerAt string `json:"nextTimerAt,omitempty" format:"date-time" example:"2026-11-29T10:05:00.000Z"`
	// Transactions counts the unresolved transactions and how transactions ended since start.
	Transactions TransactionStatus `json:"transactions"`
	// Dispatch is the store's dispatcher, which makes stored messages visible to consumers.
	Dispatch DispatchStatus `json:"dispatch"`
	// Quarantine lists records the store set aside: impossible to dispatch or read, or damaged (their CRC fails).
	Quarantine Quarantine `json:"quarantine"`
	// Disk is the store's file system and the ceilings that refuse writes (507 disk-full).
	Disk DiskStatus `json:"disk"`
	// Scrub is the background scrubber, which re-reads the CommitLog up to its durable end and verifies every frame's CRC.
	Scrub ScrubStatus `json:"scrub"`
} //	@name	BrokerStatus

// TransactionStatus counts transactional messages.
type TransactionStatus struct {
	// Pending counts the unresolved transactions (half messages not committed or rolled back).
	Pending int `json:"pending" example:"2"`
	// CommittedTotal, RolledBackTotal count the transactions ended since start; MaxChecksRolledBackTotal those of them rolled back because no check was answered (--transaction-max-checks).
	CommittedTotal           uint64 `json:"committedTotal" example:"120"`
	RolledBackTotal          uint64 `json:"rolledBackTotal" example:"3"`
	MaxChecksRolledBackTotal uint64 `json:"maxChecksRolledBackTotal" example:"1"`
	// ChecksHandedOutTotal counts the checks producer groups pulled since start.
	ChecksHandedOutTotal uint64 `json:"checksHandedOutTotal" example:"7"`
} //	@name	TransactionStatus

// DiskStatus is the store's file system: how full it is and what that refuses.
type DiskStatus struct {
	// UsedRatio is the used fraction of the data dir's file system (0..1), as df computes it.
	UsedRatio float64 `json:"usedRatio" example:"0.42"`
	// SampledAt is when it was measured (every --disk-check-interval).
	SampledAt string `json:"sampledAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
	// SampleError is why the last measurement failed (the previous one is used).
	SampleError string `json:"sampleError,omitempty" example:"statfs /data: input/output error"`
	// CleanRatio is --disk-max-used-ratio: above it retention deletes fully consumed segments early.
	CleanRatio float64 `json:"cleanRatio" example:"0.75"`
	// SendCeiling is --disk-send-ceiling: above it sends get 507 disk-full.
	SendCeiling float64 `json:"sendCeiling" example:"0.85"`
	// SystemCeiling is --disk-system-ceiling: above it acks, nacks and commits get 507 too.
	SystemCeiling float64 `json:"systemCeiling" example:"0.95"`
	// PressureDelete is --disk-pressure-delete: above cleanRatio unconsumed segments are deleted too.
	PressureDelete bool `json:"pressureDelete" example:"false"`
	// SendsRefused: sends get 507: usedRatio is above sendCeiling, or the file system has no room left for messages.
	SendsRefused bool `json:"sendsRefused" example:"false"`
	// SystemRefused: acks, nacks and commits get 507 too: usedRatio is above systemCeiling, or the room kept for them (systemRoomBytes) is used up.
	SystemRefused bool `json:"systemRefused" example:"false"`
	// NoSpaceRefusals counts writes refused because the file system had no room for them in the CommitLog, since start.
	NoSpaceRefusals int64 `json:"noSpaceRefusals" example:"0"`
	// SystemRoomBytes is the CommitLog room, allocated ahead of the writes, that acks, nacks, retries and commits may still use; sends leave its reserve (16 MiB) alone.
	SystemRoomBytes int64 `json:"systemRoomBytes" example:"16777216"`
} //	@name	DiskStatus

// ScrubStatus is the background scrubber's progress.
type ScrubStatus struct {
	// Enabled is false when the scrubber is off (--scrub-rate 0).
	Enabled bool `json:"enabled" example:"true"`
	// RateBytesPerSecond is the scrubber's pace.
	RateBytesPerSecond int64 `json:"rateBytesPerSecond" example:"16777216"`
	// Position is the CommitLog offset the current pass has verified up to.
	Position int64 `json:"position" example:"1073741824"`
	// Passes counts full passes over the durable CommitLog.
	Passes int64 `json:"passes" example:"3"`
	// LastPassAt is when the last full pass ended (absent before the first).
	LastPassAt string `json:"lastPassAt,omitempty" format:"date-time" example:"2026-11-29T09:00:00.000Z"`
	// LastPassMs is how long the last full pass took.
	LastPassMs int64 `json:"lastPassMs" example:"64000"`
	// PassStartedAt is when the current pass started (absent between passes).
	PassStartedAt string `json:"passStartedAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
	// NextPassAt is when the next pass starts (absent during a pass).
	NextPassAt string `json:"nextPassAt,omitempty" format:"date-time" example:"2026-11-29T11:00:00.000Z"`
	// BytesVerified counts the bytes verified since start.
	BytesVerified int64 `json:"bytesVerified" example:"3221225472"`
	// RecordsVerified counts the records verified since start.
	RecordsVerified int64 `json:"recordsVerified" example:"3145728"`
	// BadFrames counts the damaged frames found since start; each is also in quarantine (stage scrub).
	BadFrames int64 `json:"badFrames" example:"0"`
	// BusyMs is the time spent verifying since start.
	BusyMs int64 `json:"busyMs" example:"1200"`
} //	@name	ScrubStatus

// DispatchStatus is how far the dispatcher is behind the CommitLog.
type DispatchStatus struct {
	// DispatchedOffset is the CommitLog offset below which every message is visible to consumers.
	DispatchedOffset int64 `json:"dispatchedOffset" example:"123456"`
	// LagBytes counts stored bytes not yet visible to consumers.
	LagBytes int64 `json:"lagBytes" example:"0"`
	// DelayMs is how long the dispatcher has been behind (0 when caught up).
	DelayMs int64 `json:"delayMs" example:"0"`
	// Error is why the dispatcher's passes fail (they are retried); absent when they succeed.
	Error string `json:"error,omitempty" example:"storage: read commitlog at 4096: input/output error"`
	// FailingSince is when the passes started failing.
	FailingSince string `json:"failingSince,omitempty" format:"date-time" example:"2026-11-29T09:59:00.000Z"`
} //	@name	DispatchStatus

// Quarantine is the store's list of records set aside.
type Quarantine struct {
	// Count is how many records were quarantined.
	Count int64 `json:"count" example:"0"`
	// Records are the newest of them (at most 100), oldest first.
	Records []QuarantinedRecord `json:"records"`
} //	@name	Quarantine

// QuarantinedRecord is one record the store set aside and moved past.
type QuarantinedRecord struct {
	// Offset is the record's CommitLog offset.
	Offset int64 `json:"offset" example:"4096"`
	// Size is the record's size in bytes.
	Size int32 `json:"size" example:"40510"`
	// Stage is where it was found: dispatch (never made visible), read (a reader could not use it) or scrub (the background scrubber found it damaged).
	Stage string `json:"stage" enums:"dispatch,read,scrub" example:"dispatch"`
	// Reason says why.
	Reason string `json:"reason" example:"storage: corrupt data: record at 4096: message: corrupt payload: properties length 40350 with 40350 bytes left"`
	// At is when it was quarantined.
	At string `json:"at" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
} //	@name	QuarantinedRecord

// DelayLevel is one delay level's scheduler position.
type DelayLevel struct {
	Level     int    `json:"level" example:"3"`
	DelayMs   int64  `json:"delayMs" example:"10000"`
	Offset    int64  `json:"offset" example:"120"`
	MaxOffset int64  `json:"maxOffset" example:"125"`
	Backlog   int64  `json:"backlog" example:"5"`
	NextDueAt string `json:"nextDueAt,omitempty" format:"date-time" example:"2026-11-29T10:00:10.000Z"`
} //	@name	DelayLevel

// registerTopicRoutes registers topic administration and the queue read.
func (h *handler) registerTopicRoutes(r chi.Router) {
	// GET /v1/topics — list topics.
	r.Get("/topics", h.listTopics)
	// GET /v1/topics/{topic} — one topic.
	r.Get("/topics/{topic}", h.getTopic)
	// GET /v1/topics/{topic}/status — the offsets of its queues.
	r.Get("/topics/{topic}/status", h.topicStatus)
	// PUT /v1/topics/{topic} — create or update a topic.
	r.With(bodyLimit(smallBodyLimit), requireJSON).Put("/topics/{topic}", h.putTopic)
	// PATCH /v1/topics/{topic} — change some fields of a topic (JSON merge patch).
	r.With(bodyLimit(smallBodyLimit), requireMergePatch).Patch("/topics/{topic}", h.patchTopic)
	// DELETE /v1/topics/{topic} — delete a topic.
	r.Delete("/topics/{topic}", h.deleteTopic)
	// GET /v1/topics/{topic}/queues/{queueId}/messages — read by offset.
	r.Get("/topics/{topic}/queues/{queueId}/messages", h.readQueue)
}

// registerMessageRoutes registers the message lookups.
func (h *handler) registerMessageRoutes(r chi.Router) {
	// GET /v1/messages/{messageId} — by id.
	r.Get("/messages/{messageId}", h.getMessage)
	// GET /v1/messages?topic=&key= — by key.
	r.Get("/messages", h.queryMessages)
}

// registerBrokerRoutes registers the broker status route.
func (h *handler) registerBrokerRoutes(r chi.Router) {
	// GET /v1/broker/status — broker state.
	r.Get("/broker/status", h.brokerStatus)
	// POST /v1/broker/receipt-keys/rotate — a new receipt key.
	r.Post("/broker/receipt-keys/rotate", h.rotateReceiptKey)
}

// ReceiptKeys is the receipt keyring.
type ReceiptKeys struct {
	// SigningKeyID is the key that signs new receipts.
	SigningKeyID int `json:"signingKeyId" example:"3"`
	// KeyIDs are the keys that verify receipts, oldest first (at most 8: a receipt outlives seven rotations).
	KeyIDs []int `json:"keyIds" example:"1,2,3"`
} //	@name	ReceiptKeys

// rotateReceiptKey adds a receipt key.
//
//	@Summary		Rotate the receipt key
//	@Description	Adds a new key to the receipt keyring and signs new receipts with it. Receipts signed by the seven keys before it stay valid, so leases in flight settle as usual. The keyring is kept in the CommitLog with the topics and groups.
//	@ID				rotateReceiptKey
//	@Tags			broker
//	@Produce		json
//	@Produce		application/problem+json
//	@Success		200	{object}	ReceiptKeys
//	@Failure		500	{object}	Problem	"internal"
//	@Failure		503	{object}	Problem	"shutting-down"
//	@Failure		507	{object}	Problem	"disk-full"
//	@Router			/broker/receipt-keys/rotate [post]
func (h *handler) rotateReceiptKey(w http.ResponseWriter, r *http.Request) {
	id, err := h.deps.Broker.RotateReceiptKey(r.Context())
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, ReceiptKeys{SigningKeyID: id, KeyIDs: h.deps.Broker.ReceiptKeys()})
}

// listTopics lists topics.
//
//	@Summary	List topics
//	@ID			listTopics
//	@Tags		topics
//	@Produce	json
//	@Produce	application/problem+json
//	@Success	200	{object}	TopicList
//	@Failure	500	{object}	Problem	"internal"
//	@Failure	503	{object}	Problem	"shutting-down"
//	@Router		/topics [get]
func (h *handler) listTopics(w http.ResponseWriter, r *http.Request) {
	topics, err := h.deps.Broker.ListTopics(r.Context())
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := TopicList{Topics: make([]Topic, 0, len(topics))}
	for _, t := range topics {
		resp.Topics = append(resp.Topics, toTopic(t))
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// getTopic returns one topic.
//
//	@Summary	Get a topic
//	@ID			getTopic
//	@Tags		topics
//	@Produce	json
//	@Produce	application/problem+json
//	@Param		topic	path		string	true	"Topic name"
//	@Success	200		{object}	Topic
//	@Failure	400		{object}	Problem	"invalid-name"
//	@Failure	404		{object}	Problem	"topic-not-found"
//	@Failure	500		{object}	Problem	"internal"
//	@Failure	503		{object}	Problem	"shutting-down"
//	@Router		/topics/{topic} [get]
func (h *handler) getTopic(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	t, err := h.deps.Broker.GetTopic(r.Context(), name)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toTopic(t))
}

// topicStatus returns the offsets of a topic's queues.
//
//	@Summary		Topic status
//	@ID				getTopicStatus
//	@Description	Per queue: the offset of the first message retention kept (minOffset), the offset the next message gets (maxOffset) and the store time of the newest message (mqadmin topicStatus).
//	@Tags			topics
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			topic	path		string	true	"Topic name"
//	@Success		200		{object}	TopicStatus
//	@Failure		400		{object}	Problem	"invalid-name"
//	@Failure		404		{object}	Problem	"topic-not-found"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/topics/{topic}/status [get]
func (h *handler) topicStatus(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	queues, err := h.deps.Broker.TopicStatus(r.Context(), name)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := TopicStatus{Topic: name, Queues: make([]QueueStatus, 0, len(queues))}
	for _, q := range queues {
		resp.Queues = append(resp.Queues, QueueStatus{QueueID: q.QueueID, MinOffset: q.MinOffset, MaxOffset: q.MaxOffset, LastStoredAt: formatTime(q.LastStoredAt)})
		resp.Messages += q.MaxOffset - q.MinOffset
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// putTopic creates or replaces a topic.
//
//	@Summary		Create or replace a topic
//	@ID				putTopic
//	@Description	Creates the topic (201) or replaces its settings (200). PUT replaces the whole topic: a field left out takes its default (queues 4, retentionHours 0 = the store default, perm rw), and a topic's queue count cannot shrink. Use PATCH to change single fields. An empty body takes the defaults.
//	@Tags			topics
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			topic	path		string			true	"Topic name"
//	@Param			request	body		TopicRequest	false	"Topic settings"
//	@Success		200		{object}	Topic			"updated"
//	@Success		201		{object}	Topic			"created"
//	@Failure		400		{object}	Problem			"invalid-name, invalid-argument, malformed-request"
//	@Failure		409		{object}	Problem			"quota-exceeded (topics, queues, queuesPerTopic)"
//	@Failure		413		{object}	Problem			"body-too-large"
//	@Failure		415		{object}	Problem			"unsupported-media-type"
//	@Failure		500		{object}	Problem			"internal"
//	@Failure		503		{object}	Problem			"storage-read-only, shutting-down"
//	@Router			/topics/{topic} [put]
func (h *handler) putTopic(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req TopicRequest
	fields, err := readJSONFields(r, &req, true)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	if err := checkTopicRequest(req); err != nil {
		WriteError(w, r, err)
		return
	}
	t, created, err := h.deps.Broker.PutTopic(r.Context(), topicConfig(name, req))
	if errors.Is(err, broker.ErrQueueShrink) && req.Queues == 0 {
		change := "single fields"
		if len(fields) > 0 {
			change = "only " + strings.Join(fields, ", ")
		}
		err = fmt.Errorf("%w; use PATCH to change %s", err, change)
	}
	if err != nil {
		WriteError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/topics/"+url.PathEscape(t.Name))
	}
	writeJSON(w, r, status, toTopic(t))
}

// patchTopic changes some settings of a topic.
//
//	@Summary		Change a topic's settings
//	@ID				patchTopic
//	@Description	A JSON merge patch (RFC 7396) of the topic's settings (TopicRequest): the fields given replace the topic's, null resets a field to its default, the others stay. The result is validated like a PUT (a queue count cannot shrink). Content-Type application/merge-patch+json (or application/json).
//	@Tags			topics
//	@Accept			json
//	@Accept			application/merge-patch+json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			topic	path		string			true	"Topic name"
//	@Param			request	body		TopicRequest	true	"The fields to change"
//	@Success		200		{object}	Topic
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, malformed-request"
//	@Failure		404		{object}	Problem	"topic-not-found"
//	@Failure		409		{object}	Problem	"quota-exceeded (queues, queuesPerTopic)"
//	@Failure		413		{object}	Problem	"body-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"storage-read-only, shutting-down"
//	@Router			/topics/{topic} [patch]
func (h *handler) patchTopic(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	patch, err := readMergePatch(r)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	t, err := h.deps.Broker.PatchTopic(r.Context(), name, func(cur broker.TopicConfig) (broker.TopicConfig, error) {
		var req TopicRequest
		if err := applyMergePatch(TopicRequest{Queues: cur.Queues, RetentionHours: cur.RetentionHours, Perm: cur.Perm}, patch, &req); err != nil {
			return cur, err
		}
		if err := checkTopicRequest(req); err != nil {
			return cur, err
		}
		return topicConfig(name, req), nil
	})
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toTopic(t))
}

// checkTopicRequest applies the transport's bounds to a topic request.
func checkTopicRequest(req TopicRequest) error {
	switch {
	case req.Queues < 0 || req.Queues > maxQueues:
		return invalidArgument("queues %d must be between 1 and %d (0 = default)", req.Queues, maxQueues)
	case req.RetentionHours < 0:
		return invalidArgument("retentionHours %d must not be negative", req.RetentionHours)
	case req.Perm != "" && req.Perm != "rw" && req.Perm != "r" && req.Perm != "w":
		return invalidArgument(`perm %s must be "rw", "r" or "w"`, broker.QuoteValue(req.Perm))
	}
	return nil
}

// topicConfig converts a checked topic request.
func topicConfig(name string, req TopicRequest) broker.TopicConfig {
	return broker.TopicConfig{Name: name, Queues: req.Queues, RetentionHours: req.RetentionHours, Perm: req.Perm}
}

// deleteTopic deletes a topic with its messages.
//
//	@Summary		Delete a topic
//	@ID				deleteTopic
//	@Description	Deletes the topic and its messages for every purpose (as SQS DeleteQueue): a topic created again under the same name starts empty for every group, old and new. Its queue offsets continue (never reused); lookups by id or key no longer find the old messages; every group's offsets and leases on the topic are dropped; retries, delayed messages and timers still waiting for it are never delivered. Dead letters stay in their group's DLQ; a resend delivers to the topic's current incarnation.
//	@Tags			topics
//	@Produce		application/problem+json
//	@Param			topic	path	string	true	"Topic name"
//	@Success		204
//	@Failure		400	{object}	Problem	"invalid-name"
//	@Failure		404	{object}	Problem	"topic-not-found"
//	@Failure		500	{object}	Problem	"internal"
//	@Failure		503	{object}	Problem	"storage-read-only, shutting-down"
//	@Router			/topics/{topic} [delete]
func (h *handler) deleteTopic(w http.ResponseWriter, r *http.Request) {
	name, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	if err := h.deps.Broker.DeleteTopic(r.Context(), name); err != nil {
		WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readQueue reads messages of one queue by offset.
//
//	@Summary		Read a queue by offset
//	@ID				readQueue
//	@Description	Offset-based consumption (RocketMQ PullConsumer style): read up to max messages of one queue from offset. Nothing is leased; commit progress with PUT /groups/{group}/offsets.
//	@Description	With `group` (SUB on the group too) the group's subscription of the topic filters what is returned (its tagExpression and sql; nextOffset moves past what they refuse) and a read without `offset` starts at the group's committed offset. For a broadcasting group, X-Mqgate-Client-Id reads as that consumer instance: its first read registers it (started by the group's consumeFrom) and its committed offset is its own.
//	@Tags			offsets
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			topic	path		string	true	"Topic name"
//	@Param			queueId	path		integer	true	"Queue id"	minimum(0)	Format(int32)
//	@Param			offset	query		integer	false	"First offset to read (default 0; with group, the group's or the consumer instance's committed offset)"	minimum(0)	Format(int64)
//	@Param			max		query		integer	false	"Most messages to return"	minimum(1)	maximum(32)	default(32)
//	@Param			group	query		string	false	"Consumer group whose subscription filters the read and whose committed offset it starts at"
//	@Param			X-Mqgate-Client-Id	header	string	false	"With group, a broadcasting group's consumer instance (1 to 128 printable ASCII characters without spaces)"	maxLength(128)
//	@Success		200		{object}	QueueMessages
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, offset-out-of-range, value-too-long"
//	@Failure		403		{object}	Problem	"forbidden (SUB on group)"
//	@Failure		404		{object}	Problem	"topic-not-found, group-not-found"
//	@Failure		409		{object}	Problem	"quota-exceeded (instancesPerGroup: a broadcasting group's new consumer instance)"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/topics/{topic}/queues/{queueId}/messages [get]
func (h *handler) readQueue(w http.ResponseWriter, r *http.Request) {
	topic, err := nameParam(r, "topic", "topic")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	queueID, err := strconv.ParseInt(chi.URLParam(r, "queueId"), 10, 32)
	if err != nil || queueID < 0 {
		WriteError(w, r, invalidArgument("queueId %s must be a non-negative integer", broker.QuoteValue(chi.URLParam(r, "queueId"))))
		return
	}
	query := r.URL.Query()
	group := query.Get("group")
	from := int64(0)
	if group != "" {
		if !validName(group) {
			WriteError(w, r, fmt.Errorf("%w: group %s", broker.ErrInvalidName, broker.QuoteValue(group)))
			return
		}
		if err := requireGroup(r, group, auth.PermSub); err != nil {
			WriteError(w, r, err)
			return
		}
		from = -1 // the committed offset, unless offset says
	}
	offset, err := queryInt(query, "offset", from, 0, 1<<62)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	max, err := queryInt(query, "max", MaxReadMessages, 1, MaxReadMessages)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var msgs []broker.QueueMessage
	var next int64
	if group != "" {
		msgs, next, err = h.deps.Broker.ReadQueueFor(r.Context(), group, topic, int32(queueID), offset, int(max))
	} else {
		msgs, next, err = h.deps.Broker.ReadQueue(r.Context(), topic, int32(queueID), offset, int(max))
	}
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, QueueMessages{Messages: toMessages(msgs), NextOffset: next})
}

// getMessage looks a message up by id.
//
//	@Summary	Get a message by id
//	@ID			getMessage
//	@Tags		messages
//	@Produce	json
//	@Produce	application/problem+json
//	@Param		messageId	path		string	true	"32-hex-character message id"
//	@Success	200			{object}	Message
//	@Failure	400			{object}	Problem	"invalid-argument"
//	@Failure	404			{object}	Problem	"message-not-found"
//	@Failure	500			{object}	Problem	"internal"
//	@Failure	503			{object}	Problem	"shutting-down"
//	@Router		/messages/{messageId} [get]
func (h *handler) getMessage(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "messageId")
	if !isMessageID(id) {
		WriteError(w, r, invalidArgument("messageId %s must be %d hexadecimal characters", broker.QuoteValue(id), messageIDLength))
		return
	}
	m, err := h.deps.Broker.GetMessage(r.Context(), strings.ToUpper(id))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, ToMessage(m))
}

// queryMessages looks messages up by key.
//
//	@Summary	Find messages by key
//	@ID			findMessagesByKey
//	@Tags		messages
//	@Produce	json
//	@Produce	application/problem+json
//	@Param		topic	query		string	true	"Topic name"
//	@Param		key		query		string	true	"Business key"
//	@Param		max		query		integer	false	"Most messages to return"	minimum(1)	maximum(32)	default(32)
//	@Success	200		{object}	MessageList
//	@Failure	400		{object}	Problem	"invalid-name, invalid-argument"
//	@Failure	404		{object}	Problem	"topic-not-found"
//	@Failure	500		{object}	Problem	"internal"
//	@Failure	503		{object}	Problem	"shutting-down"
//	@Router		/messages [get]
func (h *handler) queryMessages(w http.ResponseWriter, r *http.Request) {
	query := r.URL.Query()
	topic, key := query.Get("topic"), query.Get("key")
	if !validName(topic) {
		WriteError(w, r, fmt.Errorf("%w: query parameter topic %s", broker.ErrInvalidName, broker.QuoteValue(topic)))
		return
	}
	if key == "" {
		WriteError(w, r, invalidArgument("query parameter key is required"))
		return
	}
	max, err := queryInt(query, "max", MaxReadMessages, 1, MaxReadMessages)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	msgs, err := h.deps.Broker.QueryByKey(r.Context(), topic, key, int(max))
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, MessageList{Messages: toMessages(msgs)})
}

// brokerStatus reports the broker's state.
//
//	@Summary	Broker status
//	@ID			getBrokerStatus
//	@Tags		broker
//	@Produce	json
//	@Produce	application/problem+json
//	@Success	200	{object}	BrokerStatus
//	@Failure	500	{object}	Problem	"internal"
//	@Failure	503	{object}	Problem	"shutting-down"
//	@Router		/broker/status [get]
func (h *handler) brokerStatus(w http.ResponseWriter, r *http.Request) {
	s, err := h.deps.Broker.Status(r.Context())
	if err != nil {
		WriteError(w, r, err)
		return
	}
	resp := BrokerStatus{
		StoreID:            s.StoreID,
		FlushMode:          s.FlushMode,
		StoreBytes:         s.StoreBytes,
		UptimeMs:           s.Uptime.Milliseconds(),
		CommitLogMinOffset: s.CommitLogMin,
		CommitLogMaxOffset: s.CommitLogMax,
		Levels:             make([]DelayLevel, 0, len(s.Levels)),
		ScheduledTotal:     s.Scheduled,
		LatenessP50Ms:      float64(s.LatenessP50) / float64(time.Millisecond),
		LatenessP99Ms:      float64(s.LatenessP99) / float64(time.Millisecond),
		LatenessMaxMs:      float64(s.LatenessMax) / float64(time.Millisecond),
		TimersPending:      s.TimersPending,
		NextTimerAt:        formatTime(s.NextTimerAt),
		Transactions: TransactionStatus{Pending: s.Transactions.Pending, CommittedTotal: s.Transactions.Committed,
			RolledBackTotal: s.Transactions.RolledBack, MaxChecksRolledBackTotal: s.Transactions.MaxChecksRolledBack,
			ChecksHandedOutTotal: s.Transactions.ChecksHandedOut},
		Dispatch: DispatchStatus{DispatchedOffset: s.Dispatch.Dispatched, LagBytes: s.Dispatch.LagBytes,
			DelayMs: s.Dispatch.Delay.Milliseconds(), Error: s.Dispatch.Error, FailingSince: formatTime(s.Dispatch.FailingSince)},
		Quarantine: Quarantine{Count: s.Quarantined, Records: make([]QuarantinedRecord, 0, len(s.QuarantinedRecent))},
		Disk: DiskStatus{UsedRatio: s.Disk.Usage, SampledAt: formatTime(s.Disk.SampledAt), SampleError: s.Disk.SampleError,
			CleanRatio: s.Disk.CleanRatio, SendCeiling: s.Disk.SendCeiling, SystemCeiling: s.Disk.SystemCeiling,
			PressureDelete: s.Disk.PressureDelete, SendsRefused: s.Disk.SendsRefused, SystemRefused: s.Disk.SystemRefused,
			NoSpaceRefusals: s.Disk.NoSpace, SystemRoomBytes: s.Disk.SystemRoom},
	}
	sc := s.Scrub
	resp.Scrub = ScrubStatus{Enabled: sc.Enabled, RateBytesPerSecond: sc.Rate, Position: sc.Position, Passes: sc.Passes,
		LastPassAt: formatTime(sc.LastPassAt), LastPassMs: sc.LastPassDuration.Milliseconds(),
		PassStartedAt: formatTime(sc.PassStartedAt), NextPassAt: formatTime(sc.NextPassAt),
		BytesVerified: sc.BytesVerified, RecordsVerified: sc.RecordsVerified, BadFrames: sc.BadFrames, BusyMs: sc.Busy.Milliseconds()}
	for _, q := range s.QuarantinedRecent {
		resp.Quarantine.Records = append(resp.Quarantine.Records, QuarantinedRecord{Offset: q.Offset, Size: q.Size, Stage: q.Stage, Reason: q.Reason, At: formatTime(q.At)})
	}
	for _, l := range s.Levels {
		resp.Levels = append(resp.Levels, DelayLevel{Level: l.Level, DelayMs: l.Delay.Milliseconds(), Offset: l.Offset,
			MaxOffset: l.MaxOffset, Backlog: l.Backlog, NextDueAt: formatTime(l.NextDue)})
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// queryInt parses an optional integer query parameter within [min, max].
func queryInt(query url.Values, name string, def, min, max int64) (int64, error) {
	raw := query.Get(name)
	if raw == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || v < min || v > max {
		return 0, invalidArgument("query parameter %s %s must be an integer between %d and %d", name, broker.QuoteValue(raw), min, max)
	}
	return v, nil
}

// isMessageID reports whether s looks like a message id (32 hex characters).
func isMessageID(s string) bool {
	if len(s) != messageIDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// toMessages converts broker messages to their wire form ([] when none).
func toMessages(msgs []broker.ReceivedMessage) []Message {
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, ToMessage(m))
	}
	return out
}

// toTopic converts a topic to its wire form ("" perm is the default "rw").
func toTopic(t broker.TopicConfig) Topic {
	if t.Perm == "" {
		t.Perm = "rw"
	}
	return Topic{
		Name: t.Name, Queues: t.Queues, RetentionHours: t.RetentionHours, Perm: t.Perm, CreatedAt: formatTime(t.CreatedAt),
	}
}
