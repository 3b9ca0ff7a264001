package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/mqgate/mqgate/server/broker"
)

// maxReasonLength bounds a nack reason (bytes); the history keeps its
// first 512 bytes.
const maxReasonLength = broker.MaxReasonBytes

// AckRequest settles leased messages.
type AckRequest struct {
	// Receipts are receipts from pull (1-1024).
	Receipts []string `json:"receipts"`
} //	@name	AckRequest

// NackItem sends one leased message back for a retry.
type NackItem struct {
	// Receipt is the receipt from pull.
	Receipt string `json:"receipt" example:"ARjtLxX9uENgAAAAAQAAAAAAAAAABmxhZGRlcghsYWRkZXItZCsbpUybO_juz9j6uV4s4D4"`
	// DelayLevel: -1 = straight to the dead-letter queue, 0 (default) = the group's retryPolicy (by default level 3 + reconsumeTimes), > 0 = that delay level.
	DelayLevel int `json:"delayLevel,omitempty" minimum:"-1" example:"0"`
	// DelayMs retries after this many milliseconds instead of a delay level (1..7200000; not with delayLevel).
	DelayMs int64 `json:"delayMs,omitempty" minimum:"0" maximum:"7200000" example:"1500"`
	// Reason says why processing failed; kept with retries and in the DLQ.
	Reason string `json:"reason,omitempty" maxLength:"16384" example:"payment service unavailable"`
} //	@name	NackItem

// NackRequest sends leased messages back for retries.
type NackRequest struct {
	// Items are the messages to retry (1-1024).
	Items []NackItem `json:"items"`
} //	@name	NackRequest

// LeaseItem changes the invisibility of one leased message.
type LeaseItem struct {
	// Receipt is the receipt from pull.
	Receipt string `json:"receipt" example:"ARjtLxX9uENgAAAAAQAAAAAAAAAABmxhZGRlcghsYWRkZXItZCsbpUybO_juz9j6uV4s4D4"`
	// InvisibleMs is the new lease length counted from now (0 = visible again at once, without counting a failed attempt).
	InvisibleMs int64 `json:"invisibleMs" validate:"optional" minimum:"0" maximum:"43200000" example:"60000"`
} //	@name	LeaseItem

// LeaseRequest changes leases.
type LeaseRequest struct {
	// Items are the leases to change (1-1024).
	Items []LeaseItem `json:"items"`
} //	@name	LeaseRequest

// ReceiptResult is the outcome for one receipt.
type ReceiptResult struct {
	// Receipt is the receipt as sent.
	Receipt string `json:"receipt" example:"ARjtLxX9uENgAAAAAQAAAAAAAAAABmxhZGRlcghsYWRkZXItZCsbpUybO_juz9j6uV4s4D4"`
	// Status: ok, expired (the lease is over; the message was or will be redelivered) or invalid.
	Status string `json:"status" enums:"ok,expired,invalid" example:"ok"`
	// NewReceipt is the receipt to use from now on when a lease change issued one.
	NewReceipt string `json:"newReceipt,omitempty" example:"ARjtLxX9uENgAAAAAQAAAAAAAAAABmxhZGRlcghsYWRkZXItZCsbpUybO_juz9j6uV4s4D4"`
	// Error explains a status other than ok.
	Error string `json:"error,omitempty" example:"the lease ended (it ran out or was released, or the broker restarted); the message will be delivered again"`
	// LeaseUntil is, for an ok lease change, when the changed lease runs out (RFC 3339 with milliseconds, UTC): the time of the change plus its invisibleMs (with invisibleMs 0, the moment the message became visible again). Absent from ack and nack results and from results that are not ok.
	LeaseUntil string `json:"leaseUntil,omitempty" format:"date-time" example:"2026-11-29T10:01:00.000Z"`
} //	@name	ReceiptResult

// ReceiptResponse has one result per receipt, in request order. The
// request as a whole succeeds (200) even when some receipts are not ok.
type ReceiptResponse struct {
	Results []ReceiptResult `json:"results"`
} //	@name	ReceiptResponse

// registerAckRoutes registers the ack, nack and lease routes.
func (h *handler) registerAckRoutes(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(bodyLimit(smallBodyLimit), requireJSON)
		// POST /v1/groups/{group}/ack — settle leased messages.
		r.Post("/groups/{group}/ack", h.ack)
		// POST /v1/groups/{group}/nack — retry leased messages later.
		r.Post("/groups/{group}/nack", h.nack)
		// POST /v1/groups/{group}/leases — change invisibility.
		r.Post("/groups/{group}/leases", h.changeLeases)
	})
}

// ack settles leased messages.
//
//	@Summary		Ack messages
//	@ID				ackMessages
//	@Description	Settle leased messages by receipt. Idempotent: acking twice with the same receipt is ok. A receipt of an older lease (the message was redelivered since) is `expired` and does not ack the newer delivery.
//	@Tags			consume
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string		true	"Consumer group"
//	@Param			request	body		AckRequest	true	"Receipts"
//	@Param			X-Mqgate-Client-Id	header	string	false	"The calling consumer (at most 128 printable ASCII characters without spaces), recorded in leases and attempt histories"	maxLength(128)
//	@Success		200		{object}	ReceiptResponse
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, malformed-request"
//	@Failure		404		{object}	Problem	"group-not-found"
//	@Failure		413		{object}	Problem	"body-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"storage-read-only, shutting-down"
//	@Failure		507		{object}	Problem	"disk-full"
//	@Router			/groups/{group}/ack [post]
func (h *handler) ack(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req AckRequest
	if err := readJSON(r, &req, false); err != nil {
		WriteError(w, r, err)
		return
	}
	if err := checkItems("receipts", len(req.Receipts)); err != nil {
		WriteError(w, r, err)
		return
	}
	for i, receipt := range req.Receipts {
		if receipt == "" {
			WriteError(w, r, invalidArgument("receipts[%d] is empty", i))
			return
		}
	}
	results, err := h.deps.Broker.Ack(r.Context(), group, req.Receipts)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeReceiptResponse(w, results)
}

// nack sends leased messages back for a retry.
//
//	@Summary		Nack messages
//	@ID				nackMessages
//	@Description	Give leased messages back for a retry after a delay level, after delayMs, or straight to the dead-letter queue (delayLevel -1); without either the group's retryPolicy picks the delay. After the group's retryMaxTimes retries a message goes to the DLQ.
//	@Tags			consume
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string		true	"Consumer group"
//	@Param			request	body		NackRequest	true	"Items"
//	@Param			X-Mqgate-Client-Id	header	string	false	"The calling consumer (at most 128 printable ASCII characters without spaces), recorded in leases and attempt histories"	maxLength(128)
//	@Success		200		{object}	ReceiptResponse
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, malformed-request, value-too-long (a reason over 16 KiB)"
//	@Failure		404		{object}	Problem	"group-not-found"
//	@Failure		413		{object}	Problem	"body-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"storage-read-only, shutting-down"
//	@Failure		507		{object}	Problem	"disk-full"
//	@Router			/groups/{group}/nack [post]
func (h *handler) nack(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req NackRequest
	if err := readJSON(r, &req, false); err != nil {
		WriteError(w, r, err)
		return
	}
	if err := checkItems("items", len(req.Items)); err != nil {
		WriteError(w, r, err)
		return
	}
	items := make([]broker.NackItem, 0, len(req.Items))
	for i, it := range req.Items {
		switch {
		case it.Receipt == "":
			WriteError(w, r, invalidArgument("items[%d].receipt is empty", i))
			return
		case it.DelayLevel < -1:
			WriteError(w, r, invalidArgument("items[%d].delayLevel %d must be -1 (DLQ), 0 (broker backoff) or a delay level", i, it.DelayLevel))
			return
		case it.DelayMs < 0 || it.DelayMs > broker.MaxRetryDelay.Milliseconds():
			WriteError(w, r, invalidArgument("items[%d].delayMs %d must be between 1 and %d", i, it.DelayMs, broker.MaxRetryDelay.Milliseconds()))
			return
		case it.DelayMs != 0 && it.DelayLevel != 0:
			WriteError(w, r, invalidArgument("items[%d]: give delayLevel or delayMs, not both", i))
			return
		case len(it.Reason) > maxReasonLength:
			WriteError(w, r, &broker.LimitError{Field: fmt.Sprintf("items[%d].reason", i), Size: len(it.Reason), Limit: maxReasonLength, Kind: broker.ErrValueTooLong})
			return
		}
		items = append(items, broker.NackItem{Receipt: it.Receipt, DelayLevel: it.DelayLevel, Delay: time.Duration(it.DelayMs) * time.Millisecond, Reason: it.Reason})
	}
	results, err := h.deps.Broker.Nack(r.Context(), group, items)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeReceiptResponse(w, results)
}

// changeLeases extends or shortens leases.
//
//	@Summary		Change leases
//	@ID				changeInvisibleTime
//	@Description	Extend or shorten the invisibility of leased messages (changeInvisibleTime). Never counts as a failed attempt. An ok result carries leaseUntil, when the changed lease runs out (RFC 3339 with milliseconds, UTC: the moment of the change plus invisibleMs), and may carry a newReceipt to use from then on.
//	@Tags			consume
//	@Accept			json
//	@Produce		json
//	@Produce		application/problem+json
//	@Param			group	path		string			true	"Consumer group"
//	@Param			request	body		LeaseRequest	true	"Items"
//	@Param			X-Mqgate-Client-Id	header	string	false	"The calling consumer (at most 128 printable ASCII characters without spaces), recorded in leases and attempt histories"	maxLength(128)
//	@Success		200		{object}	ReceiptResponse
//	@Failure		400		{object}	Problem	"invalid-name, invalid-argument, malformed-request"
//	@Failure		404		{object}	Problem	"group-not-found"
//	@Failure		413		{object}	Problem	"body-too-large"
//	@Failure		415		{object}	Problem	"unsupported-media-type"
//	@Failure		500		{object}	Problem	"internal"
//	@Failure		503		{object}	Problem	"storage-read-only, shutting-down"
//	@Router			/groups/{group}/leases [post]
func (h *handler) changeLeases(w http.ResponseWriter, r *http.Request) {
	group, err := nameParam(r, "group", "group")
	if err != nil {
		WriteError(w, r, err)
		return
	}
	var req LeaseRequest
	if err := readJSON(r, &req, false); err != nil {
		WriteError(w, r, err)
		return
	}
	if err := checkItems("items", len(req.Items)); err != nil {
		WriteError(w, r, err)
		return
	}
	items := make([]broker.LeaseItem, 0, len(req.Items))
	for i, it := range req.Items {
		switch {
		case it.Receipt == "":
			WriteError(w, r, invalidArgument("items[%d].receipt is empty", i))
			return
		case it.InvisibleMs < 0 || it.InvisibleMs > MaxInvisibleMs:
			WriteError(w, r, invalidArgument("items[%d].invisibleMs %d must be between 0 and %d", i, it.InvisibleMs, MaxInvisibleMs))
			return
		}
		items = append(items, broker.LeaseItem{Receipt: it.Receipt, Invisible: time.Duration(it.InvisibleMs) * time.Millisecond})
	}
	results, err := h.deps.Broker.ChangeLease(r.Context(), group, items)
	if err != nil {
		WriteError(w, r, err)
		return
	}
	writeReceiptResponse(w, results)
}

// checkItems checks the size of a batch field.
func checkItems(field string, n int) error {
	if n < 1 || n > MaxBatchItems {
		return invalidArgument("%s must hold 1-%d entries, not %d", field, MaxBatchItems, n)
	}
	return nil
}

// writeReceiptResponse writes results as a 200 ReceiptResponse, appended
// by hand: byte for byte what writeJSON writes of
// toReceiptResponse(results) (encode_internal_test.go checks), without
// reflection over every result of an ack of 32 or 1 000 receipts.
func writeReceiptResponse(w http.ResponseWriter, results []broker.ReceiptResult) {
	buf := getBuffer()
	defer putBuffer(buf)
	b := append((*buf)[:0], `{"results":[`...)
	for i := range results {
		res := &results[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"receipt":`...)
		b = appendJSONString(b, res.Receipt)
		b = append(b, `,"status":`...)
		b = appendJSONString(b, string(res.Status))
		if res.NewReceipt != "" {
			b = append(b, `,"newReceipt":`...)
			b = appendJSONString(b, res.NewReceipt)
		}
		if res.Error != "" {
			b = append(b, `,"error":`...)
			b = appendJSONString(b, res.Error)
		}
		if !res.LeaseUntil.IsZero() {
			b = append(b, `,"leaseUntil":"`...)
			b = appendTimeMillis(b, res.LeaseUntil.UTC())
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	b = append(b, "]}\n"...)
	*buf = b
	writeJSONBytes(w, b)
}

// toReceiptResponse converts per-receipt results to their wire form.
func toReceiptResponse(results []broker.ReceiptResult) ReceiptResponse {
	resp := ReceiptResponse{Results: make([]ReceiptResult, 0, len(results))}
	for _, res := range results {
		resp.Results = append(resp.Results, ReceiptResult{
			Receipt:    res.Receipt,
			Status:     string(res.Status),
			NewReceipt: res.NewReceipt,
			Error:      res.Error,
			LeaseUntil: formatTime(res.LeaseUntil),
		})
	}
	return resp
}
