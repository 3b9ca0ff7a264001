// Package send is the send family of the broker: the rules a message of a
// send must meet before anything is written, the queue it goes to, and
// the table of idempotency keys that makes a send with a dedup id
// answer its repeats.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"). It imports storage/message (the names
// of the properties a message's tag, keys, sharding key and dedup id
// travel as) and server/broker/quote of the module and nothing else, and
// server/broker imports it. What needs the broker stays there (send.go,
// limits.go): the request itself — the topic gate and the topic's
// configuration, a body over the message size limit, the transactional,
// delayed and timer sends, the store's write, the metrics — the set of
// properties the broker reserves (systemProperties, which names other
// families' properties), and the store lookup of a dedup id the table no
// longer holds.
//
// # Limits
//
// Check checks a message's tag, keys, sharding key, dedup id and
// properties against the limits (MaxTagBytes … MaxUserPropertiesBytes)
// and the property rules: labels are valid UTF-8 without control
// characters (a tag and keys also without white space, a tag without
// "||"), a property name is not empty and not reserved, a value is valid
// UTF-8, and what the producer controls takes at most
// MaxUserPropertiesBytes counted as stored (PropertyEntrySize). A value
// over a limit is a *LimitError (the broker's LimitError is an alias),
// which unwraps to ErrValueTooLong or ErrPropertiesTooLarge (the broker's
// sentinels are these); any other error is an invalid argument, and the
// broker wraps it in its ErrInvalidArgument, so the texts a client sees
// are the broker's. PrefixField names the message of a batch.
//
// # Queues
//
// ShardQueue is the queue of a sharding key (FNV-1a of the key mod the
// queue count, RocketMQ's MessageQueueSelector), so one key's messages
// stay in one queue in order; RoundRobin the queue of a send without one,
// from the broker's counter.
//
// # Dedup
//
// Table remembers the idempotency keys (Key: a topic and a dedup id) of
// recent sends. A key claimed by a send being written (Claim) is memory
// only and answers concurrent sends InFlight until the send settles
// (Settle: it then answers repeats with its result) or fails (released).
// A key becomes durable as the message's record itself — its DEDUP_ID
// property, indexed by the store — and the broker asks the store (Found)
// for a key the table does not hold, after a restart or once Expire let
// it go. The dedup window (the broker's DedupWindow) bounds a key's life:
// a settled key stored before the window's start is Unknown, so a send
// after the window is a new send. The package reads neither the clock
// nor a random source: every time is the caller's.
//
// # Locks
//
// Table has one lock (Table.Lock), which guards its entries: Lookup,
// Found, Claim and Release need it held (the broker holds it across a
// send's claims, including the store lookups of unknown keys); Settle,
// Expire and DropTopic take it. Its place among the broker's locks is in
// ARCHITECTURE.md.
package send
