package broker

import "github.com/mqgate/mqgate/server/broker/trace"

// Trace event types (TraceEvent.Type), one per kind (package trace).
const (
	TraceStored       = trace.TypeStored
	TraceDelivered    = trace.TypeDelivered
	TraceReleased     = trace.TypeReleased
	TraceAcked        = trace.TypeAcked
	TraceNacked       = trace.TypeNacked
	TraceLeaseExpired = trace.TypeLeaseExpired
	TraceRetried      = trace.TypeRetried
	TraceDeadLettered = trace.TypeDeadLettered
	TraceResent       = trace.TypeResent
	TraceDiscarded    = trace.TypeDiscarded
	TraceCommitted    = trace.TypeCommitted
	TraceRolledBack   = trace.TypeRolledBack
	TracePushed       = trace.TypePushed
	TraceDropped      = trace.TypeDropped
)
