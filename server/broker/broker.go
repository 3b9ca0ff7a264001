package broker

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/internal/worker"
	"github.com/mqgate/mqgate/server/broker/consume"
	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/server/broker/instance"
	leaselog "github.com/mqgate/mqgate/server/broker/lease"
	"github.com/mqgate/mqgate/server/broker/progress"
	"github.com/mqgate/mqgate/server/broker/registry"
	"github.com/mqgate/mqgate/server/broker/retention"
	"github.com/mqgate/mqgate/server/broker/retry"
	"github.com/mqgate/mqgate/server/broker/send"
	"github.com/mqgate/mqgate/server/broker/timer"
	"github.com/mqgate/mqgate/server/broker/trace"
	"github.com/mqgate/mqgate/server/broker/txn"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/message"
	"github.com/mqgate/mqgate/storage/offset"
	"github.com/mqgate/mqgate/storage/schedule"
)

// DefaultLease is how long a pulled message stays leased to its consumer
// when neither the pull nor its group sets invisibleMs (as RocketMQ's pop
// default and SQS's visibility timeout: 30 s).
const DefaultLease = 30 * time.Second

// Options configures a Broker. Zero values take the documented defaults.
type Options struct {
	// DataDir is the directory holding the store. Required.
	DataDir string
	// FlushMode is "sync" (default) or "async".
	FlushMode string
	// SegmentSize is the CommitLog segment size in bytes (default 1 GiB).
	SegmentSize int64
	// MaxMessageSize is the largest message body in bytes (default 4 MiB).
	MaxMessageSize int
	// NoAutoCreateGroups keeps AutoCreate from creating groups: a pull or
	// commit for an unknown group is then ErrGroupNotFound.
	NoAutoCreateGroups bool
	// AutoCreate creates unknown topics on first send and unknown groups on
	// first pull.
	AutoCreate bool
	// DelayLevels is the delay of each level, level 1 first (default
	// RocketMQ's 18 levels).
	DelayLevels []time.Duration
	// DefaultQueues is the queue count of auto-created topics (default 4).
	DefaultQueues int
	// DefaultInvisible is the lease length when neither the pull nor the
	// group sets one (default DefaultLease).
	DefaultInvisible time.Duration
	// MaxInvisible caps a lease (default 12 h, as SQS).
	MaxInvisible time.Duration
	// DedupWindow is how long an idempotency key is remembered (default 5 min, as SQS).
	DedupWindow time.Duration
	// MaxTimerDelay caps how far ahead a delayMs / deliverAt timer may be
	// (default 366 days).
	MaxTimerDelay time.Duration
	// DispatchDelayLimit is how far the store's dispatcher may fall behind
	// the log before Degraded reports it (default 10 s).
	DispatchDelayLimit time.Duration
	// SnapshotInterval is how often consumer progress is snapshotted and
	// the timer index checkpointed (default 5 s).
	SnapshotInterval time.Duration
	// TimerIndexBuffer is how many new timer records the timer index holds
	// in memory before it writes them out as a sorted run (default 65 536,
	// about 2 MiB; see package timerindex).
	TimerIndexBuffer int
	// MetricsMaxLabelValues is the most topics, and the most groups, whose
	// counters Stats reports under their own name; the others are summed
	// under OtherLabel (default 1000).
	MetricsMaxLabelValues int
	// Quotas bound the topics, queues, groups, push endpoints, pending
	// timers and unresolved transactions the API may create (quota.go);
	// zero fields are unlimited.
	Quotas Quotas
	// TransactionMaxChecks is how many checks of an unresolved transaction
	// are handed out before it is rolled back (default 15, RocketMQ's
	// transactionCheckMax; txn.go).
	TransactionMaxChecks int
	// TransactionCheckInterval is the least time between two checks of a
	// transaction (default 60 s, RocketMQ's transactionCheckInterval); a
	// send's longer checkAfterMs applies instead.
	TransactionCheckInterval time.Duration
	// NoMessageTrace turns the message trace's follower off (trace.go):
	// traces then list only the events the message's own records hold.
	NoMessageTrace bool
	// Storage carries advanced storage options (tiny files in tests,
	// retention, a new store's StoreID); its Dir, FlushMode, SegmentSize,
	// MaxMessageSize and Logger are filled from the fields above.
	Storage storage.Options
	// Logger receives the broker's logs (default zerolog.Nop()).
	Logger zerolog.Logger
	// NoPromote opens the broker as a follower: the leader-only services
	// (leader.go) wait for Promote. By default a broker promotes itself
	// at the end of Open.
	NoPromote bool
	// Clock is the broker's and its store's only source of time (default
	// the wall clock); tests pass a clockwork.FakeClock to run leases,
	// timers, retries and transactions on virtual time.
	Clock clockwork.Clock
	// Store is a store opened by the caller (a replica of a cluster: its
	// log goes through Raft, package shard), opened with StorageOptions
	// of these options; the broker does not close it. Nil: the broker
	// opens and closes the store in DataDir.
	Store *storage.Store
}

// StorageOptions are the options the broker opens its store with: a
// caller that opens the store itself (Options.Store) uses them.
func StorageOptions(o Options) (storage.Options, error) {
	return o.withDefaults().storageOptions()
}

// DefaultDelayLevels is RocketMQ's messageDelayLevel.
var DefaultDelayLevels = func() []time.Duration {
	levels, err := schedule.ParseLevels(schedule.DefaultLevels)
	if err != nil {
		panic(err) // a constant that parses
	}
	return levels
}()

// DefaultMetricsMaxLabelValues is Options.MetricsMaxLabelValues when zero.
const DefaultMetricsMaxLabelValues = 1000

// propertyOverhead is what the store allows above MaxMessageSize for the
// record's topic, tag, keys and properties.
const propertyOverhead = 64 << 10

func (o Options) withDefaults() Options {
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = 4 << 20
	}
	if len(o.DelayLevels) == 0 {
		o.DelayLevels = DefaultDelayLevels
	}
	if o.DefaultQueues == 0 {
		o.DefaultQueues = 4
	}
	if o.DefaultInvisible == 0 {
		o.DefaultInvisible = DefaultLease
	}
	if o.MaxInvisible == 0 {
		o.MaxInvisible = 12 * time.Hour
	}
	if o.DedupWindow == 0 {
		o.DedupWindow = 5 * time.Minute
	}
	if o.MaxTimerDelay == 0 {
		o.MaxTimerDelay = 366 * 24 * time.Hour
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = 5 * time.Second
	}
	if o.DispatchDelayLimit == 0 {
		o.DispatchDelayLimit = 10 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.MetricsMaxLabelValues <= 0 {
		o.MetricsMaxLabelValues = DefaultMetricsMaxLabelValues
	}
	if o.TransactionMaxChecks <= 0 {
		o.TransactionMaxChecks = DefaultTransactionMaxChecks
	}
	if o.TransactionCheckInterval <= 0 {
		o.TransactionCheckInterval = DefaultTransactionCheckInterval
	}
	return o
}

func (o Options) storageOptions() (storage.Options, error) {
	so := o.Storage
	so.Dir = o.DataDir
	if o.SegmentSize != 0 {
		so.SegmentSize = o.SegmentSize
	}
	mode := o.FlushMode
	if mode == "" {
		mode = "sync"
	}
	fm, err := storage.ParseFlushMode(mode)
	if err != nil {
		return so, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	so.FlushMode = fm
	so.MaxMessageSize = o.MaxMessageSize + propertyOverhead
	so.Logger = o.Logger
	so.Clock = o.Clock
	// Nothing is deleted before the broker can carry what must outlive
	// retention (its policy is installed at the end of Open).
	so.AwaitRetentionPolicy = true
	return so, nil
}

// Broker implements the messaging semantics. Safe for concurrent use.
type Broker struct {
	opts     Options
	log      zerolog.Logger
	store    *storage.Store
	registry *registry.Service
	progress *offset.Table
	// ledger writes the progress records and answers the progress
	// queries (package progress); its lock orders appends of progress
	// records against snapshots.
	ledger *progress.Ledger
	// instances are the broadcasting groups' consumer instances (package
	// instance; broadcast.go); they write through the ledger.
	instances *instance.Service

	// consume is the consumer's requests: the pull, the receipt loop,
	// the send-back and the lease reaper, over the map of pop states
	// (consume.go, package consume).
	consume *consume.Service
	epoch   atomic.Uint64 // lease epochs: unique across restarts (seeded from the clock and the lease records)

	// topicGate orders topic deletions against the writers of message
	// copies (topicdelete.go).
	topicGate sync.RWMutex

	metrics counters
	// sends is the send family: the request, the dedup table (send.go,
	// package send).
	sends *send.Service
	// deadLetters is the dead-letter family: statuses, requests, carry
	// (dlq.go, package dlq).
	deadLetters *dlq.Service
	timers      *timer.Service // the timer family (timer.go, package timer)
	txns        *txn.Service   // the transaction family (txn.go, package txn)
	// retries is the retry family: the send-back's write, the ladder's
	// counts, the schedule's sink (retry.go, package retry).
	retries *retry.Service
	leases  *leaselog.Log // the lease log: records, folds, snapshot (package lease; lease_log.go)
	trace   *trace.Tracer // the message trace: query, follower, carry (trace.go, package trace)
	// retention is the retention family: the floors, the carries before
	// a deletion, the cut records, the dropped counts (retention.go,
	// package retention).
	retention *retention.Service
	scheduler *schedule.Scheduler

	started time.Time
	clock   clockwork.Clock // opts.Clock: every time the broker reads
	closing chan struct{}
	// closingCtx is cancelled when the broker starts closing: the
	// context of background waits.
	closingCtx    context.Context
	cancelClosing context.CancelFunc
	closed        atomic.Bool
	timerWorkers  []*worker.Service  // timer index maintenance
	periodic      []*worker.Periodic // progress snapshot
	leader        leadership         // leader-only services (leader.go)
	follow        following          // the follower side (follow.go)
	closeMu       sync.Mutex
	closeErr      error
}

// Open opens the store in opts.DataDir, recovers consumer progress and
// starts the background workers.
func Open(ctx context.Context, opts Options) (*Broker, error) {
	opts = opts.withDefaults()
	if opts.DataDir == "" {
		return nil, fmt.Errorf("%w: data dir is required", ErrInvalidArgument)
	}
	store := opts.Store
	if store == nil {
		so, err := opts.storageOptions()
		if err != nil {
			return nil, err
		}
		if store, err = storage.Open(so); err != nil {
			return nil, err
		}
	}
	closeStore := func() error {
		if opts.Store != nil {
			return nil
		}
		return store.Close()
	}
	b := &Broker{
		opts:    opts,
		clock:   opts.Clock,
		log:     opts.Logger.With().Str("component", "broker").Logger(),
		store:   store,
		started: opts.Clock.Now(),
		closing: make(chan struct{}),
	}
	b.closingCtx, b.cancelClosing = context.WithCancel(context.Background())
	b.metrics.init(opts.MetricsMaxLabelValues)
	b.retention = b.newRetention()
	b.timers = b.newTimers()
	b.txns = b.newTxns()
	b.deadLetters = b.newDeadLetters()
	b.sends = b.newSends()
	b.retries = b.newRetries()
	b.epoch.Store(uint64(b.clock.Now().UnixNano()))
	b.follow.on.Store(true)
	b.leases = b.newLeaseLog()
	b.consume = b.newConsume()
	if err := b.recover(ctx); err != nil {
		b.timers.Abandon()
		b.cancelClosing()
		_ = closeStore()
		return nil, err
	}
	if err := b.start(); err != nil {
		return nil, errors.Join(err, b.Close(ctx))
	}
	return b, nil
}

func (b *Broker) recover(ctx context.Context) error {
	var err error
	if b.registry, err = b.openRegistry(ctx); err != nil {
		return err
	}
	if b.ledger, err = b.openLedger(ctx); err != nil {
		return err
	}
	b.progress = b.ledger.Table()
	b.instances = b.newInstances()
	b.openInstances()
	if err := b.leases.Open(ctx); err != nil {
		return err
	}

	if err := b.replayDLQStatuses(ctx); err != nil {
		return err
	}
	// A cut a follower received but had not applied when it stopped.
	if b.follow.cuts, err = b.retention.Apply(ctx, 0); err != nil {
		return err
	}
	if err := b.timers.Open(ctx); err != nil {
		return err
	}
	if err := b.openTxns(ctx); err != nil {
		return err
	}
	b.openTrace()
	b.scheduler, err = schedule.New(schedule.Config{
		Levels:       b.opts.DelayLevels,
		ProgressPath: b.store.MetaPath(delayProgress),
		FS:           b.store.FS(),
		OnDeliver:    func(_ int, late time.Duration) { b.metrics.late(late) },
		Logger:       b.opts.Logger,
		Clock:        b.clock,
	}, b.store.ScheduleSource(), b.retries.Sink(b.store.ScheduleSink()))
	return err
}

const delayProgress = "delay.progress"

// clampOffsets lowers, at start-up, every committed offset that is above
// its queue's maximum to that maximum, with a warning and a counter. The
// store rebuilds its queues from the CommitLog without losing anything, so
// this happens only when the CommitLog itself lost messages the group had
// consumed (async flush and a crash): without it the group would be
// answered offset-out-of-range forever, or skip the messages stored next
// under the reused offsets.
func (b *Broker) clampOffsets() error {
	for _, k := range b.progress.Keys() {
		storeTopic, storeQueue := k.Topic, k.QueueID
		if k.QueueID == retryQueueID {
			storeTopic, storeQueue = RetryTopic(baseGroup(k.Group)), 0
		}
		committed, _, _ := b.progress.Get(k)
		top := b.store.MaxOffset(storeTopic, storeQueue)
		if committed <= top {
			continue
		}
		if err := b.commit(k, top); err != nil {
			return fmt.Errorf("clamp the offset of %s on %s/%d: %w", k.Group, storeTopic, storeQueue, err)
		}
		b.metrics.clampedOffset()
		b.log.Warn().Str("group", k.Group).Str("topic", storeTopic).Int32("queue", storeQueue).
			Int64("from", committed).Int64("to", top).Msg("consumer offset above the queue's maximum (the store lost messages); lowered to it")
	}
	return nil
}

// start starts what every replica runs (the timer index's maintenance,
// the snapshots) and, unless NoPromote, promotes the broker (leader.go).
func (b *Broker) start() error {
	b.timerWorkers = []*worker.Service{worker.New(b.timers.IndexLoop)}
	for _, w := range b.timerWorkers {
		w.Start(b.closingCtx)
	}
	// The periodic passes run on internal/worker; each is a method tests
	// call directly (snapshot here; consume.Service.ReapExpired, dedup.expire and the
	// instance sweep in leader.go, on the broker's clock).
	b.periodic = []*worker.Periodic{
		worker.Every(b.opts.SnapshotInterval, func(context.Context, time.Time) {
			if err := b.snapshot(); err != nil {
				b.log.Error().Err(err).Msg("offset snapshot failed")
			}
			if err := b.snapshotTxns(); err != nil {
				b.log.Error().Err(err).Msg("transaction snapshot failed")
			}
		}),
	}
	for _, p := range b.periodic {
		p.Start(b.closingCtx)
	}
	b.leader.runs = b.leaderRuns()
	if b.opts.NoPromote {
		return nil
	}
	return b.Promote(b.closingCtx)
}

// snapshot writes the offsets snapshot, the leases snapshot and the
// consumer instances' last-seen times.
//
// A leader of a replicated store writes no snapshot of changes whose
// records may not be committed (they could be cut if it is deposed, and a
// snapshot of them would hold what the log never will), yet it must
// write snapshots: retention keeps every record no snapshot covers (the
// Keep floor), so a leader that wrote none would keep its log whole. Its
// offsets snapshot is taken under the progress ledger's lock held
// exclusively, where every progress record it appended is committed and
// applied (persist applies after the commit), and only while its store
// is not fenced (a fence is how a write ends with an unknown outcome,
// whose change is not applied); its leases snapshot is written from the fold of the committed
// lease records (package lease's Log.Snapshot), not from its pop states.
func (b *Broker) snapshot() error {
	return errors.Join(b.ledger.WriteSnapshot(), b.snapshotLeases(), b.snapshotInstances())
}

// Close stops the workers, snapshots consumer progress and leases and closes the
// store. Pending long polls return. It is idempotent.
func (b *Broker) Close(ctx context.Context) error {
	b.closeMu.Lock()
	defer b.closeMu.Unlock()
	if b.closed.Swap(true) {
		return b.closeErr
	}
	// No retention pass after this (a pass under way ends first, before
	// the closing context would cut its carries short): its carries write
	// to the timer index and the registry, closed below.
	b.store.PauseRetention()
	close(b.closing)
	b.Demote()
	b.cancelClosing()
	for _, p := range b.periodic {
		p.Stop()
	}
	for _, w := range b.timerWorkers {
		w.Stop()
	}
	var errs []error
	errs = append(errs, b.scheduler.Stop())
	errs = append(errs, b.timers.Close())
	errs = append(errs, b.closeTxns())
	errs = append(errs, b.snapshot())
	if b.opts.Store == nil {
		errs = append(errs, b.store.Close())
	}
	b.closeErr = errors.Join(errs...)
	return b.closeErr
}

// Ready reports whether the broker can take traffic: open, writable, and
// with a dispatcher whose passes succeed.
func (b *Broker) Ready() error {
	if b.closed.Load() {
		return ErrShuttingDown
	}
	if err := b.store.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrReadOnly, err)
	}
	if st := b.store.DispatchStatus(); st.Err != nil {
		return fmt.Errorf("%w at CommitLog offset %d since %s: %w", ErrDispatchStalled, st.Dispatched,
			st.FailingSince.UTC().Format(time.RFC3339), st.Err)
	}
	return nil
}

// Degraded lists what is wrong without making the broker unready: records
// quarantined by the store, a dispatcher more than DispatchDelayLimit
// behind the log. Empty when all is well.
func (b *Broker) Degraded() []string {
	var out []string
	if q := b.store.Quarantined(); q.Count > 0 {
		last := q.Recent[len(q.Recent)-1]
		out = append(out, fmt.Sprintf("%d records quarantined by the store (newest at CommitLog offset %d, %s: %s; see GET /v1/broker/status)",
			q.Count, last.Offset, last.Stage, last.Reason))
	}
	if r := b.store.RepairStats(); r.LostRecords > 0 {
		out = append(out, fmt.Sprintf("the CommitLog lost %d queued messages (their queue offsets are given out again); %d consume queues rebuilt", r.LostRecords, r.QueuesRebuilt))
	}
	b.metrics.mu.Lock()
	clamped := b.metrics.clamped
	b.metrics.mu.Unlock()
	if clamped > 0 {
		out = append(out, fmt.Sprintf("%d consumer offsets were above their queue's maximum and were lowered to it", clamped))
	}
	if st := b.store.DispatchStatus(); st.Delay > b.opts.DispatchDelayLimit {
		out = append(out, fmt.Sprintf("dispatcher %v behind the log (%d bytes not yet visible to consumers)", st.Delay.Truncate(time.Second), st.LagBytes))
	}
	switch d := b.store.DiskStatus(); {
	case d.SystemRefused && d.Usage > d.SystemCeiling:
		out = append(out, fmt.Sprintf("disk %.1f%% used, above the system ceiling %.0f%%: sends, acks and other records are refused (507 disk-full) until space is freed",
			100*d.Usage, 100*d.SystemCeiling))
	case d.SystemRefused:
		out = append(out, fmt.Sprintf("disk %.1f%% used and the room kept for the broker's own records is gone: sends, acks and other records are refused (507 disk-full) until space is freed",
			100*d.Usage))
	case d.SendsRefused && d.Usage > d.SendCeiling:
		out = append(out, fmt.Sprintf("disk %.1f%% used, above the send ceiling %.0f%%: sends are refused (507 disk-full); acks, nacks and commits go on (%.1f MiB kept for them)",
			100*d.Usage, 100*d.SendCeiling, float64(d.SystemRoom)/(1<<20)))
	case d.SendsRefused:
		out = append(out, fmt.Sprintf("disk %.1f%% used and the file system has no room for more messages: sends are refused (507 disk-full); acks, nacks and commits go on (%.1f MiB kept for them)",
			100*d.Usage, float64(d.SystemRoom)/(1<<20)))
	}
	return out
}

// Quarantined reports the records the store set aside.
func (b *Broker) Quarantined() (count int64, recent []QuarantinedRecord) {
	q := b.store.Quarantined()
	for _, r := range q.Recent {
		recent = append(recent, QuarantinedRecord(r))
	}
	return q.Count, recent
}

// Status reports the broker's state (mqadmin brokerStatus).
func (b *Broker) Status(ctx context.Context) (BrokerStatus, error) {
	st := b.store.Stats()
	stats := b.Stats()
	id := b.store.StoreID()
	out := BrokerStatus{
		StoreID:            strings.ToUpper(hex.EncodeToString(id[:])),
		FlushMode:          b.store.FlushMode().String(),
		StoreBytes:         st.DiskBytes,
		Uptime:             b.clock.Since(b.started),
		CommitLogMin:       st.CommitLogMin,
		CommitLogMax:       st.CommitLogMax,
		Appends:            st.Appends,
		Flushes:            st.Flushes,
		FlushTime:          st.FlushTime,
		MaxFlush:           st.MaxFlush,
		FlushCounts:        st.FlushCounts[:],
		FlushBuckets:       storage.FlushBuckets[:],
		FlushRecordCounts:  st.FlushRecordCounts[:],
		FlushRecordBuckets: storage.FlushRecordBuckets[:],
		FlushRecords:       st.FlushRecords,
		Scheduled:          stats.Scheduled,
		LatenessP50:        stats.LatenessP50,
		LatenessP99:        stats.LatenessP99,
		LatenessMax:        stats.LatenessMax,
	}
	out.TimersPending, out.NextTimerAt = b.TimerCount()
	out.Transactions = b.TransactionStatus()
	ds := b.store.DispatchStatus()
	out.Dispatch = DispatchStatus{Dispatched: ds.Dispatched, LagBytes: ds.LagBytes, Delay: ds.Delay, FailingSince: ds.FailingSince}
	if ds.Err != nil {
		out.Dispatch.Error = ds.Err.Error()
	}
	out.Quarantined, out.QuarantinedRecent = b.Quarantined()
	out.Disk = DiskStatus(b.store.DiskStatus())
	sc := b.store.ScrubStatus()
	out.Scrub = ScrubStatus{Enabled: sc.Enabled, Rate: sc.Rate, Position: sc.Position, Passes: sc.Passes,
		LastPassAt: sc.LastPassAt, LastPassDuration: sc.LastPassDuration, PassStartedAt: sc.PassStartedAt,
		NextPassAt: sc.NextPassAt, BytesVerified: sc.BytesVerified, RecordsVerified: sc.RecordsVerified,
		BadFrames: sc.BadFrames, Busy: sc.Busy}
	for _, l := range b.scheduler.Status() {
		out.Levels = append(out.Levels, DelayLevelStatus{Level: l.Level, Delay: l.Delay, Offset: l.Offset, MaxOffset: l.MaxOffset, Backlog: l.Backlog, NextDue: l.NextDue})
	}
	return out, nil
}

// scanSystemQueue calls fn, in order, for every message of queue 0 of a
// system topic from offset from (or its retained minimum) to its end:
// the replay of progress, dead-letter status and timer records at start.
func (b *Broker) scanSystemQueue(ctx context.Context, topic string, from int64, fn func(*message.Message)) error {
	_, err := b.replayQueue(ctx, topic, from, fn)
	return err
}

// replayQueue is scanSystemQueue returning the queue offset it stopped
// at: the next record to apply.
func (b *Broker) replayQueue(ctx context.Context, topic string, from int64, fn func(*message.Message)) (int64, error) {
	return storage.Replay(ctx, b.store, topic, from, fn)
}

// mapStoreErr turns storage errors into broker sentinels.
func mapStoreErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrReadOnly):
		return storeErr(ErrReadOnly, err, nil)
	case errors.Is(err, storage.ErrDiskFull):
		return storeErr(ErrDiskFull, err, storage.ErrDiskFull)
	case errors.Is(err, storage.ErrClosed):
		return storeErr(ErrShuttingDown, err, nil)
	case errors.Is(err, storage.ErrMessageTooLarge):
		return storeErr(ErrTooLarge, err, storage.ErrMessageTooLarge)
	case errors.Is(err, storage.ErrOffsetTooSmall):
		return storeErr(ErrOffsetOutOfRange, err, storage.ErrOffsetTooSmall)
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return storeErr(ErrOffsetOutOfRange, err, storage.ErrOffsetOutOfRange)
	case errors.Is(err, storage.ErrNotFound):
		return storeErr(ErrMessageNotFound, err, nil)
	case errors.Is(err, storage.ErrUnknownOutcome):
		return storeErr(ErrOutcomeUnknown, err, nil)
	case errors.Is(err, storage.ErrNotLeader):
		return storeErr(ErrNotLeader, err, nil)
	}
	return err
}

// storeError is a storage error as the broker reports it: one of the
// broker's sentinels, whose text callers see (the problem's detail), with
// the store's error kept in the chain for errors.Is and errors.As.
type storeError struct {
	sentinel, cause error
	text            string
}

func (e *storeError) Error() string   { return e.text }
func (e *storeError) Unwrap() []error { return []error{e.sentinel, e.cause} }

// storeErr wraps the store's cause in sentinel. The text is the
// sentinel's; when the cause is "<shown>: what", what (about the request:
// a size, an offset, the disk's fill) follows it. The store's own
// sentinel text, which names the storage layer, is never shown, nor is a
// cause that says only how the store works inside (shown nil).
func storeErr(sentinel, cause, shown error) error {
	text := sentinel.Error()
	if shown != nil {
		if what, ok := strings.CutPrefix(cause.Error(), shown.Error()+": "); ok {
			text += ": " + what
		}
	}
	return &storeError{sentinel: sentinel, cause: cause, text: text}
}

// toReceived converts a stored message for the wire.
func toReceived(m *message.Message) ReceivedMessage {
	out := ReceivedMessage{
		MessageID:       messageID(m),
		Topic:           m.Topic,
		QueueID:         m.QueueID,
		QueueOffset:     m.QueueOffset,
		ReconsumeTimes:  m.ReconsumeTimes,
		OriginMessageID: m.Property(message.PropertyOriginMessageID),
		Tag:             m.Tag(),
		Keys:            m.Keys(),
		Body:            m.Body,
		BornAt:          time.UnixMilli(m.BornTimestamp).UTC(),
		StoredAt:        time.UnixMilli(m.StoreTimestamp).UTC(),
	}
	if rt := m.Property(message.PropertyRetryTopic); rt != "" {
		out.Topic = rt
	}
	for k, v := range m.Properties {
		if _, sys := systemProperties[k]; sys {
			continue
		}
		if out.Properties == nil {
			out.Properties = make(map[string]string)
		}
		out.Properties[k] = v
	}
	return out
}

// messageID is the id a stored message is known by: its own, or, for a
// committed transactional message, the transaction's (the send's id).
func messageID(m *message.Message) string {
	if id := m.Property(propTxnID); id != "" {
		return id
	}
	return message.NewID(m.StoreHost, m.PhysicalOffset).String()
}

// copyOf is message.CopyTo: the base of every copy the broker writes.
func copyOf(m *message.Message, topic string, drop ...string) *message.Message {
	return m.CopyTo(topic, drop...)
}

// systemProperties are set by the broker; clients cannot set them.
var systemProperties = map[string]struct{}{
	message.PropertyTags: {}, message.PropertyKeys: {}, message.PropertyUniqKey: {},
	message.PropertyRetryTopic: {}, message.PropertyOriginMessageID: {}, message.PropertyRealTopic: {},
	message.PropertyRealQueueID: {}, message.PropertyDelayLevel: {}, message.PropertyMaxReconsumeTimes: {},
	message.PropertyDeliverTimeMs: {}, message.PropertyShardingKey: {}, message.PropertyDedupID: {},
	propAttempts: {}, dlq.PropReason: {}, dlq.PropID: {}, dlq.PropDeadAt: {}, timer.PropID: {}, timer.PropPrev: {}, propOrderSeq: {},
	propTxnID: {}, propTxnGroup: {}, propTxnCheckAfter: {}, propTxnChecks: {}, propTxnNextCheck: {},
	propInstance: {},
}

// isSystemProperty reports whether name is one of systemProperties.
func isSystemProperty(name string) bool {
	_, sys := systemProperties[name]
	return sys
}
