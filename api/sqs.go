package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// The queues of the SQS-compatible endpoint (--sqs-listen, package
// server/sqs), listed for the console: each SQS queue is a topic and a
// clustering group of one name (sqs_<name>, sqsfifo_<base> for
// <base>.fifo), and this is where a client finds which, by the queue's SQS
// name.

// SQSCatalog lists the SQS endpoint's queues; the server adapts
// server/sqs to it.
type SQSCatalog interface {
	// SQSQueues returns the endpoint's base URL and the queues whose names
	// start with prefix, by name.
	SQSQueues(ctx context.Context, prefix string) (endpoint string, queues []SQSQueue, err error)
}

// SQSQueueList is the answer of GET /v1/sqs/queues.
type SQSQueueList struct {
	// Enabled reports that the SQS endpoint is served (--sqs-listen); off,
	// no queue is listed.
	Enabled bool `json:"enabled" example:"true"`
	// Endpoint is the SQS endpoint's base URL, its address as bound (an
	// SDK's endpoint URL); absent when it is off.
	Endpoint string `json:"endpoint,omitempty" example:"http://127.0.0.1:9324"`
	// Queues are the queues, by name.
	Queues []SQSQueue `json:"queues"`
} //	@name	SQSQueueList

// SQSQueue is one queue of the SQS endpoint.
type SQSQueue struct {
	// Name is the SQS queue name.
	Name string `json:"name" example:"orders"`
	// Fifo reports a FIFO queue (a name ending in .fifo).
	Fifo bool `json:"fifo" example:"false"`
	// Topic is the topic that holds the queue's messages.
	Topic string `json:"topic" example:"sqs_orders"`
	// Group is the clustering group SQS receivers consume it as (the
	// topic's name).
	Group string `json:"group" example:"sqs_orders"`
	// URL is the queue URL on endpoint.
	URL string `json:"url" example:"http://127.0.0.1:9324/000000000000/orders"`
	// Arn is the queue's ARN.
	Arn string `json:"arn" example:"arn:aws:sqs:us-east-1:000000000000:orders"`
	// DeadLetterQueue is the queue its RedrivePolicy names (absent without
	// one).
	DeadLetterQueue string `json:"deadLetterQueue,omitempty" example:"orders-dlq"`
	// MaxReceiveCount is the RedrivePolicy's count (absent without one).
	MaxReceiveCount int `json:"maxReceiveCount,omitempty" example:"5"`
	// DeadLetterSourceQueues are the queues whose RedrivePolicy names
	// this one.
	DeadLetterSourceQueues []string `json:"deadLetterSourceQueues"`
	// Attributes are the settable SQS attributes in force, defaults
	// included (VisibilityTimeout, DelaySeconds, RedrivePolicy, …).
	Attributes map[string]string `json:"attributes"`
	// Tags are the queue's tags.
	Tags map[string]string `json:"tags"`
	// CreatedAt is the queue's CreatedTimestamp.
	CreatedAt string `json:"createdAt" format:"date-time" example:"2026-12-01T10:00:00Z"`
	// LastModifiedAt is its LastModifiedTimestamp.
	LastModifiedAt string `json:"lastModifiedAt" format:"date-time" example:"2026-12-01T10:00:00Z"`
} //	@name	SQSQueue

// maxSQSQueueName is the longest SQS queue name (and prefix).
const maxSQSQueueName = 80

// registerSQSRoutes registers the SQS catalog route.
func (h *handler) registerSQSRoutes(r chi.Router) {
	// GET /v1/sqs/queues — the SQS endpoint's queues, by SQS name.
	r.Get("/sqs/queues", h.listSQSQueues)
}

// listSQSQueues lists the queues of the SQS-compatible endpoint.
//
//	@Summary		List the SQS endpoint's queues
//	@ID				listSQSQueues
//	@Description	The queues of the SQS-compatible endpoint (--sqs-listen) by their SQS names, each with the topic and the clustering group that hold it, its URL, ARN, dead-letter queue and sources, attributes and tags: what a console needs to show SQS queues by name. With the endpoint off, enabled is false and no queue is listed.
//	@Tags			topics
//	@Produce		json
//	@Param			prefix	query		string	false	"Only queues whose names start with it (QueueNamePrefix): up to 80 of A-Z a-z 0-9 _ - ."
//	@Success		200		{object}	SQSQueueList
//	@Failure		400		{object}	Problem	"invalid-argument"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"shutting-down"
//	@Router			/sqs/queues [get]
func (h *handler) listSQSQueues(w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	if len(prefix) > maxSQSQueueName {
		WriteError(w, r, invalidArgument("prefix is longer than %d characters", maxSQSQueueName))
		return
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			WriteError(w, r, invalidArgument("prefix may only hold A-Z a-z 0-9 _ - . (an SQS queue name's characters)"))
			return
		}
	}
	out := SQSQueueList{Queues: []SQSQueue{}}
	if h.deps.SQS != nil {
		endpoint, queues, err := h.deps.SQS.SQSQueues(r.Context(), prefix)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		out.Enabled, out.Endpoint = true, endpoint
		if queues != nil {
			out.Queues = queues
		}
	}
	writeJSON(w, r, http.StatusOK, out)
}
