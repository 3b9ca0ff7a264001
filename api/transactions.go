package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/auth"
	"github.com/mqgate/mqgate/server/broker"
)

// Transactions is the transactional-message half of the broker (RocketMQ's
// TransactionMQProducer): end a transaction, look one up, and the checks
// of unresolved ones a producer group pulls.
type Transactions interface {
	// CommitTransaction delivers a transaction's message.
	CommitTransaction(ctx context.Context, id string) (broker.Transaction, error)
	// RollbackTransaction discards it.
	RollbackTransaction(ctx context.Context, id string) (broker.Transaction, error)
	// GetTransaction describes a transaction.
	GetTransaction(ctx context.Context, id string) (broker.Transaction, error)
	// PullTransactionChecks hands out due checks of a producer group,
	// long-polling up to wait.
	PullTransactionChecks(ctx context.Context, group string, limit int, wait time.Duration) ([]broker.TransactionCheck, error)
}

// Transaction is a transactional (half) message and how it stands.
type Transaction struct {
	// TransactionID is the transaction's id: the messageId of its send.
	TransactionID string `json:"transactionId" example:"7F00000100001F9000000000000004D2"`
	// State is pending, committed or rolled-back.
	State string `json:"state" enums:"pending,committed,rolled-back" example:"pending"`
	// Reason says why a rolled-back transaction ended: producer (a rollback), max-checks (no answer to any check), topic-deleted, lost.
	Reason string `json:"reason,omitempty" enums:"producer,max-checks,topic-deleted,lost" example:"producer"`
	// ProducerGroup is the group asked about it.
	ProducerGroup string `json:"producerGroup" example:"order-service"`
	// Topic and QueueID are where the message is delivered when committed.
	Topic   string `json:"topic" example:"orders"`
	QueueID int32  `json:"queueId" example:"1"`
	// MessageID is the committed message's id (the transaction id); QueueOffset its offset in the queue (committed only, when known).
	MessageID   string `json:"messageId,omitempty" example:"7F00000100001F9000000000000004D2"`
	QueueOffset *int64 `json:"queueOffset,omitempty" example:"42"`
	// CheckTimes counts the checks handed out to the producer group.
	CheckTimes int `json:"checkTimes" example:"0"`
	// NextCheckAt is when the next check falls due (pending only).
	NextCheckAt string `json:"nextCheckAt,omitempty" format:"date-time" example:"2026-11-29T10:00:06.000Z"`
	// CreatedAt is when the half message was stored; FinishedAt when the transaction ended.
	CreatedAt  string `json:"createdAt,omitempty" format:"date-time" example:"2026-11-29T10:00:00.000Z"`
	FinishedAt string `json:"finishedAt,omitempty" format:"date-time" example:"2026-11-29T10:00:02.000Z"`
} //	@name	Transaction

// TransactionChecksRequest asks for due checks of a producer group's unresolved transactions.
type TransactionChecksRequest struct {
	// MaxMessages is the most checks to return (default 16).
	MaxMessages int `json:"maxMessages,omitempty" minimum:"1" maximum:"32" default:"16" example:"16"`
	// WaitMs is how long to long-poll when no check is due (0 = answer at once).
	WaitMs int64 `json:"waitMs,omitempty" minimum:"0" maximum:"30000" default:"0" example:"20000"`
} //	@name	TransactionChecksRequest

// TransactionCheck asks the producer how one transaction ended: answer with a commit or a rollback.
type TransactionCheck struct {
	TransactionID string `json:"transactionId" example:"7F00000100001F9000000000000004D2"`
	// CheckTimes counts the checks handed out, this one included.
	CheckTimes int `json:"checkTimes" example:"1"`
	// NextCheckAt is when the next check falls due if this one goes unanswered.
	NextCheckAt string `json:"nextCheckAt,omitempty" format:"date-time" example:"2026-11-29T10:00:06.000Z"`
	// Message is the half message as a pull renders it (its topic and queue, the transaction id as messageId, queueOffset -1, no receipt).
	Message Message `json:"message"`
} //	@name	TransactionCheck

// TransactionChecksResponse lists the checks handed out (empty when the wait ran out).
type TransactionChecksResponse struct {
	Transactions []TransactionCheck `json:"transactions"`
} //	@name	TransactionChecksResponse

// registerTransactionRoutes registers the transaction routes.
func (h *handler) registerTransactionRoutes(r chi.Router) {
	// POST /v1/transactions/{transactionId}/commit — deliver the half message.
	r.With(bodyLimit(smallBodyLimit)).Post("/transactions/{transactionId}/commit", h.commitTransaction)
	// POST /v1/transactions/{transactionId}/rollback — discard it.
	r.With(bodyLimit(smallBodyLimit)).Post("/transactions/{transactionId}/rollback", h.rollbackTransaction)
	// GET /v1/transactions/{transactionId} — how it stands.
	r.Get("/transactions/{transactionId}", h.getTransaction)
	// POST /v1/producer-groups/{producerGroup}/transactions/pull — checks due (long poll).
	r.With(bodyLimit(smallBodyLimit), requireJSON).Post("/producer-groups/{producerGroup}/transactions/pull", h.pullTransactionChecks)
}

// commitTransaction delivers a transaction's half message.
//
//	@Summary		Commit a transaction
//	@Description	Delivers the half message to its topic and queue as a normal message (its id is the transaction id; tag, keys and properties as sent), once. Idempotent: committing a committed transaction answers 200 as the first commit did; one that was rolled back is 409 `transaction-finished` with `state` rolled-back. A commit of a transaction whose topic was deleted rolls it back (409, reason topic-deleted).
//	@Description	With authentication it needs PUB on the transaction's topic. The body is ignored.
//	@ID				commitTransaction
//	@Tags			transactions
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			transactionId	path		string	true	"Transaction id (the send's transactionId)"
//	@Success		200				{object}	Transaction
//	@Failure		400				{object}	Problem	"invalid-argument (not a transaction id)"
//	@Failure		403				{object}	Problem	"forbidden"
//	@Failure		404				{object}	Problem	"transaction-not-found"
//	@Failure		409				{object}	Problem	"transaction-finished (state: rolled-back)"
//	@Failure		500				{object}	Problem	"internal"
//	@Failure		503				{object}	Problem	"flush-timeout, storage-read-only, shutting-down"
//	@Failure		507				{object}	Problem	"disk-full"
//	@Router			/transactions/{transactionId}/commit [post]
func (h *handler) commitTransaction(w http.ResponseWriter, r *http.Request) {
	h.endTransaction(w, r, h.deps.Broker.CommitTransaction)
}

// rollbackTransaction discards a transaction's half message.
//
//	@Summary		Roll a transaction back
//	@Description	Discards the half message: no group ever sees it. Idempotent: rolling back a rolled-back transaction answers 200; a committed one is 409 `transaction-finished` with `state` committed.
//	@Description	With authentication it needs PUB on the transaction's topic. The body is ignored.
//	@ID				rollbackTransaction
//	@Tags			transactions
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			transactionId	path		string	true	"Transaction id (the send's transactionId)"
//	@Success		200				{object}	Transaction
//	@Failure		400				{object}	Problem	"invalid-argument (not a transaction id)"
//	@Failure		403				{object}	Problem	"forbidden"
//	@Failure		404				{object}	Problem	"transaction-not-found"
//	@Failure		409				{object}	Problem	"transaction-finished (state: committed)"
//	@Failure		500				{object}	Problem	"internal"
//	@Failure		503				{object}	Problem	"flush-timeout, storage-read-only, shutting-down"
//	@Failure		507				{object}	Problem	"disk-full"
//	@Router			/transactions/{transactionId}/rollback [post]
func (h *handler) rollbackTransaction(w http.ResponseWriter, r *http.Request) {
	h.endTransaction(w, r, h.deps.Broker.RollbackTransaction)
}

func (h *handler) endTransaction(w http.ResponseWriter, r *http.Request, end func(context.Context, string) (broker.Transaction, error)) {
	id := chi.URLParam(r, "transactionId")
	if err := h.requireTransactionTopic(r, id); err != nil {
		WriteError(w, r, err)
		return
	}
	t, err := end(r.Context(), id)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toTransaction(t))
}

// getTransaction describes a transaction.
//
//	@Summary		Get a transaction
//	@Description	How a transaction stands: pending (with the checks handed out and when the next falls due), committed or rolled-back (and why). A finished transaction is known as long as retention keeps its records.
//	@Description	With authentication it needs PUB on the transaction's topic.
//	@ID				getTransaction
//	@Tags			transactions
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			transactionId	path		string	true	"Transaction id"
//	@Success		200				{object}	Transaction
//	@Failure		400				{object}	Problem	"invalid-argument"
//	@Failure		403				{object}	Problem	"forbidden"
//	@Failure		404				{object}	Problem	"transaction-not-found"
//	@Failure		500				{object}	Problem	"internal"
//	@Failure		503				{object}	Problem	"shutting-down"
//	@Router			/transactions/{transactionId} [get]
func (h *handler) getTransaction(w http.ResponseWriter, r *http.Request) {
	t, err := h.deps.Broker.GetTransaction(r.Context(), chi.URLParam(r, "transactionId"))
	if err == nil {
		err = requireTopic(r, t.Topic, auth.PermPub)
	}
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeJSON(w, r, http.StatusOK, toTransaction(t))
}

// pullTransactionChecks hands out the due checks of a producer group.
//
//	@Summary		Pull transaction checks
//	@Description	RocketMQ's check-back, pulled: the unresolved transactions of the producer group whose check is due (the first checkAfterMs after the send, each later one max(checkAfterMs, --transaction-check-interval) after the previous), up to maxMessages. Answer each with a commit or a rollback. Every check handed out counts (checkTimes); a transaction whose --transaction-max-checks checks all went unanswered is rolled back (reason max-checks) when the next would fall due.
//	@Description	When no check is due the call waits up to waitMs (at most 30000) and returns as soon as one falls due; it answers 200 with an empty list when the wait runs out or the server shuts down. A producer needs no port of its own.
//	@Description	With authentication it needs PUB on the producer group (a group of the ACL file).
//	@ID				pullTransactionChecks
//	@Tags			transactions
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			producerGroup	path		string						true	"Producer group"
//	@Param			request			body		TransactionChecksRequest	false	"Pull options"
//	@Success		200				{object}	TransactionChecksResponse
//	@Failure		400				{object}	Problem	"invalid-name, invalid-argument, malformed-request"
//	@Failure		403				{object}	Problem	"forbidden"
//	@Failure		413				{object}	Problem	"body-too-large"
//	@Failure		415				{object}	Problem	"unsupported-media-type"
//	@Failure		429				{object}	Problem	"too-many-waiters (the server's --max-waiters or the account's maxLongPolls), rate-limited"
//	@Failure		500				{object}	Problem	"internal"
//	@Failure		503				{object}	Problem	"storage-read-only, shutting-down"
//	@Failure		507				{object}	Problem	"disk-full"
//	@Router			/producer-groups/{producerGroup}/transactions/pull [post]
func (h *handler) pullTransactionChecks(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "producerGroup", "producer group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req TransactionChecksRequest
	if err := readJSON(r, &req, true); err != nil {
		WriteError(w, r, err)
		return
	}
	if err := checkPoll(&req.MaxMessages, req.WaitMs); err != nil {
		WriteError(w, r, err)
		return
	}
	wait := time.Duration(req.WaitMs) * time.Millisecond
	if wait > 0 {
		release, err := h.beginLongPoll(w, r, wait)
		if err != nil {
			WriteError(w, r, err)
			return
		}
		defer release()
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait+pollGrace)
	defer cancel()
	stop := context.AfterFunc(h.deps.PollContext, cancel)
	defer stop()

	checks, err := h.deps.Broker.PullTransactionChecks(ctx, group, req.MaxMessages, wait)
	if err != nil {
		ended := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		if !ended || r.Context().Err() != nil {
			WriteError(w, r, err)
			return
		}
		checks = nil
	}
	resp := TransactionChecksResponse{Transactions: make([]TransactionCheck, 0, len(checks))}
	for _, c := range checks {
		resp.Transactions = append(resp.Transactions, TransactionCheck{TransactionID: c.Transaction.ID, CheckTimes: c.Transaction.CheckTimes,
			NextCheckAt: formatTime(c.Transaction.NextCheckAt), Message: ToMessage(c.Message)})
	}
	writeJSON(w, r, http.StatusOK, resp)
}

// requireTransactionTopic checks, with authentication, that the caller
// holds PUB on the topic of transaction id (admins hold everything).
func (h *handler) requireTransactionTopic(r *http.Request, id string) error {
	p, ok := principalFrom(r)
	if !ok || p.Admin() {
		return nil
	}
	t, err := h.deps.Broker.GetTransaction(r.Context(), id)
	if err != nil {
		return err
	}
	return requireTopic(r, t.Topic, auth.PermPub)
}

// requireProducerGroups checks, with authentication, that the caller holds
// PUB on the producer group of every transactional message of a send.
func requireProducerGroups(r *http.Request, msgs []broker.SendMessage) error {
	p, ok := principalFrom(r)
	if !ok {
		return nil
	}
	for _, m := range msgs {
		if m.Transactional && !p.Can(auth.Group, m.ProducerGroup, auth.PermPub) {
			return forbidden(p, auth.Group, m.ProducerGroup, auth.PermPub)
		}
	}
	return nil
}

// transactionHeaders reads a raw send's transaction headers into msg.
func transactionHeaders(r *http.Request, msg *broker.SendMessage) error {
	if v := header(r.Header, headerTransactional); v != "" {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%w: %s %s is not true or false", ErrMalformedRequest, headerTransactional, broker.QuoteValue(v))
		}
		msg.Transactional = on
	}
	msg.ProducerGroup = header(r.Header, headerProducerGroup)
	if v := header(r.Header, headerCheckAfterMs); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %s %s is not an integer", ErrMalformedRequest, headerCheckAfterMs, broker.QuoteValue(v))
		}
		msg.CheckAfterMs = ms
	}
	return nil
}

func toTransaction(t broker.Transaction) Transaction {
	out := Transaction{TransactionID: t.ID, State: t.State, Reason: t.Reason, ProducerGroup: t.ProducerGroup, Topic: t.Topic,
		QueueID: t.QueueID, CheckTimes: t.CheckTimes, NextCheckAt: formatTime(t.NextCheckAt),
		CreatedAt: formatTime(t.CreatedAt), FinishedAt: formatTime(t.FinishedAt)}
	if t.State == broker.TxnCommitted {
		out.MessageID = t.ID
		if t.QueueOffset >= 0 {
			off := t.QueueOffset
			out.QueueOffset = &off
		}
	}
	return out
}
