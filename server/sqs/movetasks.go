package sqs

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"slices"
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
// MaxNumberOfMessagesPerSecond a second when given.
//
// Tasks survive restarts. Each is a record (moveRecord) in its source
// queue's entry of the queue table (meta.go), which lives in the
// CommitLog: written before StartMessageMoveTask answers, at every change
// of status and, while it runs, every moveCheckpoint when it moved
// messages; the last maxTaskHistory of each source queue are kept. At a
// start the table's tasks are listed again as they were, and the leader
// resumes the running ones (resumeMoves, from the redrive mover's loop)
// from what they had moved, and finishes those a cancel was stopping.
// The messages a task had received but not yet moved come back when
// their lease (moveLease) runs out, and a resumed task waits that long
// for them before it counts the queue empty; one it had sent but not yet
// deleted is sent again under the same dedup id (the dead letter's
// first id), which the broker's 5-minute window drops. A shutdown leaves
// a running task RUNNING; only CancelMessageMoveTask cancels one.
//
// Why the queue table and not a record of the broker's own: the broker's
// registry records (topics, groups, tombstones, receipt keys) have no
// kind for an adapter's state, and adding one is a change to the broker;
// the table is already the endpoint's state in the CommitLog — written
// through the same group commit, shipped with the log to a follower, read
// back by whichever node leads — so a task is kept exactly like the
// queue's attributes and its redrive cursor, and needs no file of its own
// under the data dir.

const (
	maxTaskHistory = 10
	// maxMoveRate bounds MaxNumberOfMessagesPerSecond (as SQS).
	maxMoveRate = 500
	// moveLease is how long a task holds the messages it received while
	// it moves them.
	moveLease = 30 * time.Second
	// moveCheckpoint is how often a running task writes its progress.
	moveCheckpoint = 5 * time.Second
	// moveSaveTimeout bounds writing a task's record when the task ends
	// (also at shutdown).
	moveSaveTimeout = 5 * time.Second
)

// Task statuses.
const (
	taskRunning    = "RUNNING"
	taskCompleted  = "COMPLETED"
	taskCancelling = "CANCELLING"
	taskCancelled  = "CANCELLED"
	taskFailed     = "FAILED"
)

// moveRecord is a task as the queue table keeps it (part of the table's
// JSON: rename nothing).
type moveRecord struct {
	Handle string `json:"handle"`
	// Destination is the destination queue ("" = each message's source).
	Destination string `json:"destination,omitempty"`
	Rate        int    `json:"rate,omitempty"`
	// Started is Unix milliseconds.
	Started int64  `json:"started"`
	Status  string `json:"status"`
	Moved   int64  `json:"moved"`
	ToMove  int64  `json:"toMove"`
	Failure string `json:"failure,omitempty"`
}

// moveTask is one task.
type moveTask struct {
	handle      string
	source      queueName
	destination queueName // "" = each message's source queue
	rate        int
	started     time.Time
	// created is the source queue's creation time (for a table entry the
	// task makes).
	created int64

	mu     sync.Mutex
	status string
	moved  int64
	toMove int64
	// failure says why a FAILED task failed.
	failure string
	// running: the task's goroutine was started (finished closes when it
	// ends); a task read back from the table runs once resumed.
	running bool
	// resumed is when a task read back from the table was resumed.
	resumed time.Time
	// cancel stops the running goroutine.
	cancel context.CancelFunc
	// savedMoved and savedAt are the progress last written.
	savedMoved int64
	savedAt    time.Time
	finished   chan struct{}
}

// record is t as the table keeps it (t.mu held).
func (t *moveTask) record() moveRecord {
	return moveRecord{
		Handle: t.handle, Destination: string(t.destination), Rate: t.rate, Started: t.started.UnixMilli(),
		Status: t.status, Moved: t.moved, ToMove: t.toMove, Failure: t.failure,
	}
}

// taskOfRecord is the task a table record describes; a RUNNING or
// CANCELLING one waits for resumeMoves.
func taskOfRecord(source queueName, r moveRecord) *moveTask {
	t := &moveTask{
		handle: r.Handle, source: source, destination: queueName(r.Destination), rate: r.Rate,
		started: time.UnixMilli(r.Started), status: r.Status, moved: r.Moved, toMove: r.ToMove,
		failure: r.Failure, savedMoved: r.Moved, finished: make(chan struct{}),
	}
	if r.Status != taskRunning && r.Status != taskCancelling {
		close(t.finished)
	}
	return t
}

// moveTasks are the tasks of every source queue, newest last.
type moveTasks struct {
	mu sync.Mutex
	// loaded: the table's tasks were read (loadMoves).
	loaded bool
	tasks  map[queueName][]*moveTask
}

// loadMoves reads the tasks of the queue table once.
func (h *Handler) loadMoves(ctx context.Context) error {
	h.moves.mu.Lock()
	defer h.moves.mu.Unlock()
	return h.loadMovesLocked(ctx)
}

func (h *Handler) loadMovesLocked(ctx context.Context) error {
	if h.moves.loaded {
		return nil
	}
	all, err := h.meta.all(ctx)
	if err != nil {
		return err
	}
	tasks := map[queueName][]*moveTask{}
	for q, qm := range all {
		for _, r := range qm.Moves {
			if r.Handle != "" {
				tasks[q] = append(tasks[q], taskOfRecord(q, r))
			}
		}
	}
	h.moves.tasks, h.moves.loaded = tasks, true
	return nil
}

// errSkipSave: the task's source queue is gone, its record with it.
var errSkipSave = errors.New("sqs: the source queue is gone")

// saveMove writes t's record into its source queue's entry of the table.
func (h *Handler) saveMove(ctx context.Context, t *moveTask) error {
	t.mu.Lock()
	rec := t.record()
	t.mu.Unlock()
	_, err := h.meta.update(ctx, t.source, func(cur *queueMeta) (*queueMeta, error) {
		if cur == nil {
			if _, err := h.b.GetTopic(ctx, t.source.topic()); err != nil {
				return nil, errSkipSave // deleted: keep no entry for it
			}
			cur = &queueMeta{Created: t.created, Modified: t.created}
		}
		i := slices.IndexFunc(cur.Moves, func(r moveRecord) bool { return r.Handle == rec.Handle })
		if i >= 0 {
			cur.Moves[i] = rec
		} else {
			cur.Moves = append(cur.Moves, rec)
		}
		if n := len(cur.Moves); n > maxTaskHistory {
			cur.Moves = cur.Moves[n-maxTaskHistory:]
		}
		return cur, nil
	})
	if errors.Is(err, errSkipSave) {
		return nil
	}
	if err == nil {
		t.mu.Lock()
		t.savedMoved, t.savedAt = rec.Moved, h.opts.Now()
		t.mu.Unlock()
	}
	return err
}

// resumeMoves runs the tasks read back from the table that were running,
// and finishes those a cancel was stopping (on the leader). It starts
// them under h.moves.mu, after checking that Close has not begun, so that
// Close waits for every task it started.
func (h *Handler) resumeMoves(ctx context.Context) error {
	h.moves.mu.Lock()
	if err := h.loadMovesLocked(ctx); err != nil {
		h.moves.mu.Unlock()
		return err
	}
	var cancelled []*moveTask
	for _, list := range h.moves.tasks {
		for _, t := range list {
			t.mu.Lock()
			switch {
			case t.running || h.runCtx.Err() != nil:
			case t.status == taskCancelling:
				t.status = taskCancelled
				close(t.finished)
				cancelled = append(cancelled, t)
			case t.status == taskRunning:
				tctx, cancel := context.WithCancel(h.runCtx)
				t.running, t.resumed, t.cancel = true, h.opts.Now(), cancel
				h.log.Info().Str("queue", string(t.source)).Int64("moved", t.moved).Int64("to_move", t.toMove).Msg("SQS message move task resumed")
				go h.runMove(tctx, t)
			}
			t.mu.Unlock()
		}
	}
	h.moves.mu.Unlock()
	var errs []error
	for _, t := range cancelled {
		errs = append(errs, h.saveMove(ctx, t))
	}
	return errors.Join(errs...)
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
	qs, err := h.resolveName(ctx, src)
	if err != nil {
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
	visible, notVisible, _, err := h.count(ctx, qs)
	if err != nil {
		return nil, err
	}
	h.moves.mu.Lock()
	defer h.moves.mu.Unlock()
	if err := h.loadMovesLocked(ctx); err != nil {
		return nil, err
	}
	list := h.moves.tasks[src]
	if n := len(list); n > 0 && (list[n-1].state() == taskRunning || list[n-1].state() == taskCancelling) {
		return nil, errInvalidParameter("A message move task is already running on %s.", src)
	}
	var nonce [9]byte
	_, _ = rand.Read(nonce[:])
	t := &moveTask{
		handle: base64.RawURLEncoding.EncodeToString(append(nonce[:], ":"+string(src)...)),
		source: src, destination: dst, rate: rate, started: h.opts.Now(), created: qs.meta.Created,
		status: taskRunning, toMove: visible + notVisible, running: true, finished: make(chan struct{}),
	}
	// Durable before it runs or is answered: a restart resumes it.
	if err := h.saveMove(ctx, t); err != nil {
		return nil, err
	}
	list = append(list, t)
	if len(list) > maxTaskHistory {
		list = list[len(list)-maxTaskHistory:]
	}
	h.moves.tasks[src] = list
	tctx, cancel := context.WithCancel(h.runCtx)
	t.cancel = cancel
	go h.runMove(tctx, t)
	return &taskHandleOutput{TaskHandle: t.handle}, nil
}

func (t *moveTask) state() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// runMove moves the task's messages until it has moved toMove, the queue
// is empty, or it is cancelled (CancelMessageMoveTask). When its context
// ends otherwise (a shutdown) it stays RUNNING, its progress written, to
// be resumed at the next start.
func (h *Handler) runMove(ctx context.Context, t *moveTask) {
	defer close(t.finished)
	save := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), moveSaveTimeout)
		defer cancel()
		if err := h.saveMove(sctx, t); err != nil {
			h.log.Warn().Err(err).Str("queue", string(t.source)).Msg("writing an SQS message move task failed")
		}
	}
	finish := func(status, failure string) {
		t.mu.Lock()
		if t.status == taskCancelling {
			status = taskCancelled
		}
		t.status, t.failure = status, failure
		t.mu.Unlock()
		save()
	}
	// stopped ends the task after ctx ended: cancelled, or (a shutdown)
	// left running with its progress written.
	stopped := func() {
		if t.state() == taskCancelling {
			finish(taskCancelled, "")
			return
		}
		save()
	}
	group := t.source.topic()
	for {
		t.mu.Lock()
		done := t.moved >= t.toMove
		left := t.toMove - t.moved
		checkpoint := t.moved > t.savedMoved && h.opts.Now().Sub(t.savedAt) >= moveCheckpoint
		resumed := t.resumed
		t.mu.Unlock()
		if done {
			finish(taskCompleted, "")
			return
		}
		if ctx.Err() != nil {
			stopped()
			return
		}
		if checkpoint {
			save()
		}
		n := int(min(10, left))
		if t.rate > 0 {
			n = min(n, t.rate) // moved within the lease
		}
		// A resumed task waits for the messages it held before the
		// restart to come back.
		var wait time.Duration
		if !resumed.IsZero() {
			wait = min(time.Until(resumed.Add(moveLease+2*time.Second)), 20*time.Second)
		}
		msgs, err := h.b.Pull(ctx, broker.PullRequest{Group: group, Topic: group, MaxMessages: n, Wait: max(wait, 0), Invisible: moveLease, NoAutoCreate: true})
		if err != nil {
			if ctx.Err() != nil {
				stopped()
				return
			}
			finish(taskFailed, asAPIError(err).msg)
			return
		}
		if len(msgs) == 0 {
			if wait > 0 {
				continue
			}
			finish(taskCompleted, "")
			return
		}
		for _, m := range msgs {
			if err := h.moveOne(ctx, t, m); err != nil {
				// Give the message back, then stop.
				_, _ = h.b.ChangeLease(context.WithoutCancel(ctx), group, []broker.LeaseItem{{Receipt: m.Receipt}})
				if ctx.Err() != nil {
					stopped()
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
	// The dead letter's first id: the same after its lease ran out (a
	// task that stopped between the send and the delete sends it again
	// under the same dedup id), new each time a message dies again.
	first := m.MessageID
	if m.OriginMessageID != "" {
		first = m.OriginMessageID
	}
	if props[propID] == "" {
		props[propID] = first
	}
	msg := broker.SendMessage{Body: m.Body, Properties: props, DedupID: "sqs-move-" + first}
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

func (h *Handler) cancelMessageMoveTask(ctx context.Context, _ *request, in *cancelMessageMoveTaskInput) (*cancelMessageMoveTaskOutput, error) {
	if in.TaskHandle == "" {
		return nil, errMissing("TaskHandle")
	}
	if err := h.loadMoves(ctx); err != nil {
		return nil, err
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
		status := found.status
		found.mu.Unlock()
		return nil, errInvalidParameter("The message move task is not running (%s).", status)
	}
	if !found.running {
		// Read back from the table and not resumed yet: cancelled here.
		found.status = taskCancelled
		close(found.finished)
		moved := found.moved
		found.mu.Unlock()
		if err := h.saveMove(ctx, found); err != nil {
			return nil, err
		}
		return &cancelMessageMoveTaskOutput{ApproximateNumberOfMessagesMoved: moved}, nil
	}
	found.status = taskCancelling
	found.mu.Unlock()
	found.cancel()
	<-found.finished
	found.mu.Lock()
	defer found.mu.Unlock()
	return &cancelMessageMoveTaskOutput{ApproximateNumberOfMessagesMoved: found.moved}, nil
}

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
	if err := h.loadMoves(ctx); err != nil {
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
