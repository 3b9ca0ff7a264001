package registry

import (
	"time"

	"github.com/mqgate/mqgate/server/broker/retry"
)

// The configurations the registry holds. They are part of server/broker's
// API (broker.TopicConfig and the others are aliases of these) and of the
// on-disk format: the META records and the snapshot files hold them as
// JSON under their Go field names (doc.go), so add fields, never change or
// remove one.

// TopicConfig describes a topic.
type TopicConfig struct {
	// Name is the topic name.
	Name string
	// Queues is the number of queues (default 4).
	Queues int
	// RetentionHours is how long CommitLog data of the topic is kept
	// (0 = the store's default).
	RetentionHours int
	// Perm is "rw" (default), "r" or "w".
	Perm string
	// CreatedAt is when the topic was created.
	CreatedAt time.Time
}

// Subscription is one topic a group consumes, with a tag filter and a
// property filter.
type Subscription struct {
	// Topic is the subscribed topic.
	Topic string
	// TagExpression filters by tag ("" or "*" = all).
	TagExpression string
	// SQL filters by properties: an SQL92 expression over the user
	// properties and TAGS (package server/broker/filter); "" = none. A
	// message must pass both filters.
	SQL string `json:",omitempty"`
}

// Broadcasting is the ConsumeMode of a group in which every consumer
// instance gets every message (RocketMQ's MessageModel.BROADCASTING): its
// progress is its instances' (package instance).
const Broadcasting = "broadcasting"

// GroupConfig describes a consumer group.
type GroupConfig struct {
	// Name is the group name.
	Name string
	// ConsumeMode is "clustering" (default) or Broadcasting.
	ConsumeMode string
	// Orderly makes the group deliver at most one message per sharding key
	// at a time.
	Orderly bool
	// RetryMaxTimes is how many retries a message gets before the DLQ
	// (default 16).
	RetryMaxTimes int
	// Invisible is the default lease length of a pull.
	Invisible time.Duration
	// Subscriptions are the topics the group consumes.
	Subscriptions []Subscription
	// ConsumeFrom is where the group starts in a queue of a topic it
	// subscribes to and has no offset for, applied when the subscription
	// is created (server/broker/progress's consumefrom.go): "" (first: the queue's first offset),
	// "last" (its max offset then) or an RFC 3339 time (the first message
	// stored at or after it), kept in UTC.
	ConsumeFrom string `json:",omitempty"`
	// RetryPolicy picks the delay of a retry that neither a nack's
	// delayLevel nor its delay chose (package retry); nil = the delay
	// ladder (level 3 + reconsumeTimes).
	RetryPolicy *retry.Policy `json:",omitempty"`
	// InstanceIdle is how long a consumer instance of a broadcasting
	// group may make no request before it is forgotten, its offsets with
	// it (server/broker's broadcast.go); 0 = broker.DefaultInstanceIdle.
	InstanceIdle time.Duration `json:",omitempty"`
	// Push, when set, makes the gateway deliver the group's messages to a
	// webhook endpoint (package server/push); nil = pull consumers only.
	// The stored pointer is shared with every reader of the group: to
	// change it, store a modified copy.
	Push *PushConfig `json:",omitempty"`
	// CreatedAt is when the group was created.
	CreatedAt time.Time
}

// PushConfig is a group's webhook (push) endpoint. The gateway POSTs each
// message of the group's subscribed topics to URL: a 2xx answer acks it,
// anything else nacks it (the group's retry ladder, then its DLQ), and
// 410 Gone also disables the endpoint. Validation and defaults:
// server/broker's NormalizePush.
type PushConfig struct {
	// URL is the http or https endpoint messages are POSTed to.
	URL string
	// Secret signs every request (Standard Webhooks): "whsec_" followed by
	// the base64 of 24 to 64 random bytes. Never returned by a GET.
	Secret string
	// Mode is the request body: "json" (default: the message as the pull
	// API renders it) or "binary" (the raw body, metadata in headers).
	Mode string `json:",omitempty"`
	// MaxConcurrency bounds the group's requests in flight (default 8).
	MaxConcurrency int
	// Timeout bounds one request (default 15 s, at most 60 s).
	Timeout time.Duration
	// Disabled stops delivery (set by a 410 Gone answer, or by an admin);
	// messages wait in the group until it is enabled again.
	Disabled bool
	// DisabledReason says why the endpoint was disabled.
	DisabledReason string `json:",omitempty"`
}

// Tombstone records a topic's deletion (server/broker's topicdelete.go):
// every message of the deleted topic lies below CommitLogOffset, and every
// schedule entry for it at delay level L below ScheduleOffsets[L-1].
type Tombstone struct {
	DeletedAt       time.Time
	CommitLogOffset int64
	ScheduleOffsets []int64
}
