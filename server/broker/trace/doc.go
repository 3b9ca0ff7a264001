// Package trace is the message trace's record family: the codec of the
// rmq_sys_TRACE records the broker's trace follower writes and its trace
// query reads, the event kinds (part of the on-disk format) and the index
// keys the records are found by.
//
// It is the first package of the broker's split by record family
// (ARCHITECTURE.md, "The broker as a state machine"): it imports nothing of
// the module, and server/broker imports it. The follower that writes these
// records and the query that reads them still live in server/broker
// (trace_follow.go, trace.go) until the family moves whole.
package trace
