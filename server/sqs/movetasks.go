package sqs

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mqgate/mqgate/server/broker"
)

// Message move tasks (StartMessageMoveTask, ListMessageMoveTasks,
// CancelMessageMoveTask): a task receives the messages of a dead-letter
// queue and sends each to DestinationArn's queue or, without one, back to
// the queue it was redriven from (the property sqs.source the redrive
// mover sets), deleting it from the dead-letter queue once sent. It moves
// as many messages as the queue held when it started, at most
// MaxNumberOfMessagesPerSecond a second when given. Tasks run in the
// endpoint's process and are kept in memory (the last maxTaskHistory of
// each source queue): a restart ends the running ones (the messages not
// yet moved stay in the dead-letter queue).

const (
	maxTaskHistory = 10
	// maxMoveRate bounds MaxNumberOfMessagesPerSecond (as SQS).
	maxMoveRate = 500
)

// Task statuses.
const (
	taskRunning    = "RUNNING"
	taskCompleted  = "COMPLETED"
	taskCancelling = "CANCELLING"
	taskCancelled  = "CANCELLED"
	taskFailed     = "FAILED"
)

// moveTask is one task.
type moveTask struct {
	handle      string
	source      queueName
	destination queueName // "" = each message's source queue
	rate        int
	started     time.Time
	cancel      context.CancelFunc

	mu       sync.Mutex
	status   string
	moved    int64
	toMove   int64
	failure  string
	finished chan struct{}
}

// moveTasks are the tasks of every source queue, newest last.
type moveTasks struct {
	mu    sync.Mutex
	tasks map[queueName][]*moveTask
	seq   int64
}

type startMessageMoveTaskInput struct {
	SourceArn                    string
	DestinationArn               string
	MaxNumberOfMessagesPerSecond *int
}

type taskHandleOutput struct {
	TaskHandle string `json:",omitempty"`
}

// queueOfArn is the queue an ARN names.
func queueOfArn(field, arn string) (queueName, error) {
	parts := strings.Split(arn, ":")
	if arn == "" {
		return "", errMissing(field)
	}
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return "", errInvalidParameter("Value %s for parameter %s is invalid. Reason: not an SQS queue ARN.", truncate(arn, 100), field)
	}
	q, err := parseQueueName(parts[5])
	if err != nil {
		return "", errInvalidParameter("Value %s for parameter %s is invalid. Reason: %v.", truncate(arn, 100), field, err)
	}
	return q, nil
}

func (h *Handler) startMessageMoveTask(ctx context.Context, _ *request, in *startMessageMoveTaskInput) (*taskHandleOutput, error) {
	src, err := queueOfArn("SourceArn", in.SourceArn)
	if err != nil {
		return nil, err
	}
	if _, err := h.resolveName(ctx, src); err != nil {
		return nil, err
	}
	sources, err := h.meta.sources(ctx, src)
	if err != nil {
		return nil, err
	}
	if len(sources) == 0 {
		return nil, errInvalidParameter("Source queue %s is not a dead-letter queue: no queue's RedrivePolicy names it.", src)
	}
	var dst queueName
	if in.DestinationArn != "" {
		if dst, err = queueOfArn("DestinationArn", in.DestinationArn); err != nil {
			return nil, err
		}
		if dst == src {
			return nil, errInvalidParameter("The destination cannot be the source queue.")
		}
		if _, err := h.resolveName(ctx, dst); err != nil {
			return nil, err
		}
	}
	rate := 0
	if in.MaxNumberOfMessagesPerSecond != nil {
		if rate, err = intParam("MaxNumberOfMessagesPerSecond", in.MaxNumberOfMessagesPerSecond, 0, 1, maxMoveRate); err != nil {
			return nil, err
		}
	}
	qs, err := h.resolveName(ctx, src)
	if err != nil {
		return nil, err
	}
	visible, notVisible, _, err := h.count(ctx, qs)
	if err != nil {
		return nil, err
	}
	h.moves.mu.Lock()
	defer h.moves.mu.Unlock()
	if h.moves.tasks == nil {
		h.moves.tasks = map[queueName][]*moveTask{}
	}
	list := h.moves.tasks[src]
	if n := len(list); n > 0 && (list[n-1].state() == taskRunning || list[n-1].state() == taskCancelling) {
		return nil, errInvalidParameter("A message move task is already running on %s.", src)
	}
	h.moves.seq++
	tctx, cancel := context.WithCancel(h.runCtx)
	t := &moveTask{
		handle: base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d:%s", h.moves.seq, src))),
		source: src, destination: dst, rate: rate, started: h.opts.Now(), cancel: cancel,
		status: taskRunning, toMove: visible + notVisible, finished: make(chan struct{}),
	}
	list = append(list, t)
	if len(list) > maxTaskHistory {
		list = list[len(list)-maxTaskHistory:]
	}
	h.moves.tasks[src] = list
	go h.runMove(tctx, t)
	return &taskHandleOutput{TaskHandle: t.handle}, nil
}

func (t *moveTask) state() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// runMove moves the task's messages until it has moved toMove, the queue
// is empty, or it is cancelled.
func (h *Handler) runMove(ctx context.Context, t *moveTask) {
	defer close(t.finished)
	finish := func(status, failure string) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.status == taskCancelling {
			status = taskCancelled
		}
		t.status, t.failure = status, failure
	}
	group := t.source.topic()
	for {
		t.mu.Lock()
		done := t.moved >= t.toMove
		t.mu.Unlock()
		if done {
			finish(taskCompleted, "")
			return
		}
		if ctx.Err() != nil {
			finish(taskCancelled, "")
			return
		}
		n := min(10, int(t.toMove))
		msgs, err := h.b.Pull(ctx, broker.PullRequest{Group: group, Topic: group, MaxMessages: n, Invisible: 30 * time.Second, NoAutoCreate: true})
		if err != nil {
			if ctx.Err() != nil {
				finish(taskCancelled, "")
				return
			}
			finish(taskFailed, err.Error())
			return
		}
		if len(msgs) == 0 {
			finish(taskCompleted, "")
			return
		}
		for _, m := range msgs {
			if err := h.moveOne(ctx, t, m); err != nil {
				// Give the message back, then stop.
				_, _ = h.b.ChangeLease(context.WithoutCancel(ctx), group, []broker.LeaseItem{{Receipt: m.Receipt}})
				if ctx.Err() != nil {
					finish(taskCancelled, "")
				} else {
					finish(taskFailed, asAPIError(err).msg)
				}
				return
			}
			t.mu.Lock()
			t.moved++
			t.mu.Unlock()
			if t.rate > 0 {
				select {
				case <-ctx.Done():
				case <-time.After(time.Second / time.Duration(t.rate)):
				}
			}
		}
	}
}

// moveOne sends m to its destination and deletes it from the source.
func (h *Handler) moveOne(ctx context.Context, t *moveTask, m broker.ReceivedMessage) error {
	dst := t.destination
	if dst == "" {
		q, err := parseQueueName(m.Properties[propSource])
		if err != nil {
			return errInvalidParameter("message %s was not redriven from a queue (no %s property): give a DestinationArn", m.MessageID, propSource)
		}
		dst = q
	}
	qs, err := h.resolveName(ctx, dst)
	if err != nil {
		return err
	}
	props := map[string]string{}
	for k, v := range m.Properties {
		if k != propSource {
			props[k] = v
		}
	}
	if props[propID] == "" {
		id := m.MessageID
		if m.OriginMessageID != "" {
			id = m.OriginMessageID
		}
		props[propID] = id
	}
	msg := broker.SendMessage{Body: m.Body, Properties: props, DedupID: "sqs-move-" + m.MessageID}
	if qs.name.fifo() {
		msg.ShardingKey = props[propGroup]
	}
	if _, err := h.b.Send(ctx, qs.name.topic(), []broker.SendMessage{msg}); err != nil && !errors.Is(err, broker.ErrIdempotencyKeyReused) {
		return err
	}
	_, err = h.b.Ack(ctx, t.source.topic(), []string{m.Receipt})
	return err
}

type cancelMessageMoveTaskInput struct {
	TaskHandle string
}

type cancelMessageMoveTaskOutput struct {
	ApproximateNumberOfMessagesMoved int64
}

func (h *Handler) cancelMessageMoveTask(_ context.Context, _ *request, in *cancelMessageMoveTaskInput) (*cancelMessageMoveTaskOutput, error) {
	if in.TaskHandle == "" {
		return nil, errMissing("TaskHandle")
	}
	h.moves.mu.Lock()
	var found *moveTask
	for _, list := range h.moves.tasks {
		for _, t := range list {
			if t.handle == in.TaskHandle {
				found = t
			}
		}
	}
	h.moves.mu.Unlock()
	if found == nil {
		return nil, newError("ResourceNotFoundException", "ResourceNotFoundException", 400, "No message move task has the handle %q.", truncate(in.TaskHandle, 100))
	}
	found.mu.Lock()
	if found.status != taskRunning {
		found.mu.Unlock()
		return nil, errInvalidParameter("The message move task is not running (%s).", found.state0())
	}
	found.status = taskCancelling
	found.mu.Unlock()
	found.cancel()
	<-found.finished
	found.mu.Lock()
	defer found.mu.Unlock()
	return &cancelMessageMoveTaskOutput{ApproximateNumberOfMessagesMoved: found.moved}, nil
}

// state0 is the status with t.mu held.
func (t *moveTask) state0() string { return t.status }

type listMessageMoveTasksInput struct {
	SourceArn  string
	MaxResults *int
}

type moveTaskResult struct {
	TaskHandle                        string `json:",omitempty"`
	Status                            string
	SourceArn                         string
	DestinationArn                    string `json:",omitempty"`
	MaxNumberOfMessagesPerSecond      *int   `json:",omitempty"`
	ApproximateNumberOfMessagesMoved  int64
	ApproximateNumberOfMessagesToMove *int64 `json:",omitempty"`
	FailureReason                     string `json:",omitempty"`
	StartedTimestamp                  int64
}

type listMessageMoveTasksOutput struct {
	Results []moveTaskResult
}

func (h *Handler) listMessageMoveTasks(ctx context.Context, _ *request, in *listMessageMoveTasksInput) (*listMessageMoveTasksOutput, error) {
	src, err := queueOfArn("SourceArn", in.SourceArn)
	if err != nil {
		return nil, err
	}
	if _, err := h.resolveName(ctx, src); err != nil {
		return nil, err
	}
	limit, err := intParam("MaxResults", in.MaxResults, 1, 1, maxTaskHistory)
	if err != nil {
		return nil, err
	}
	h.moves.mu.Lock()
	list := append([]*moveTask(nil), h.moves.tasks[src]...)
	h.moves.mu.Unlock()
	out := &listMessageMoveTasksOutput{Results: []moveTaskResult{}}
	for i := len(list) - 1; i >= 0 && len(out.Results) < limit; i-- {
		t := list[i]
		t.mu.Lock()
		r := moveTaskResult{
			Status: t.status, SourceArn: queueArn(t.source), ApproximateNumberOfMessagesMoved: t.moved,
			FailureReason: t.failure, StartedTimestamp: t.started.UnixMilli(),
		}
		if t.status == taskRunning {
			r.TaskHandle = t.handle
			toMove := t.toMove
			r.ApproximateNumberOfMessagesToMove = &toMove
		}
		if t.destination != "" {
			r.DestinationArn = queueArn(t.destination)
		}
		if t.rate > 0 {
			rate := t.rate
			r.MaxNumberOfMessagesPerSecond = &rate
		}
		t.mu.Unlock()
		out.Results = append(out.Results, r)
	}
	return out, nil
}
