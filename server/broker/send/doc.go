// Package send is the send family of the broker: the send request — the
// rules a message of a send must meet before anything is written, the
// queue it goes to, the messages it builds, the table of idempotency keys
// that makes a send with a dedup id answer its repeats, the write and the
// results — and the dedup window's expiry.
//
// It is a package of the broker's split by record family (ARCHITECTURE.md,
// "The broker as a state machine"). It holds its request logic, so it may
// import the store's facade and its leaf packages (storage,
// storage/message), never the engines under them nor the replication
// layers, and, of the server, the families it builds on: registry (a
// topic's configuration), timer and txn (what a timer's and a half
// message's record hold: timer.Wrap, txn.AsHalf, their topics and the
// transaction's id) and quote; never server/broker, whose registry,
// transactions, timers, quotas and counters it reaches through its Config
// (funcs the facade fills in: server/broker/send.go). What stays in the
// broker and why: Send's check that the broker is open (the facade's
// closed flag); the set of properties the broker reserves
// (systemProperties, which names every family's properties: Config's
// Reserved); the auto-creation of a topic and the registry lookups (the
// registry lock is the facade's); the transaction quotas and the pending
// timers' quota (Config.ReserveTxn, CheckTimers: the quota rules are the
// broker's, quota.go and txn.go); the store lookup of a dedup id (package
// txn's FindDedup, which also finds a transaction's half message); the
// counters.
//
// # The request
//
// Service.Send checks the topic's name, the batch's size (1 to MaxBatch)
// and that a transactional message is alone, then takes the read side of
// the broker's topic gate (Config.Gate) for the rest: the topic (auto-
// created through Config.CreateTopic), each message's limits (the body
// here, the rest Check's), its transaction fields and its timer, the
// message it becomes (a delay level's: the scheduler's topic and the
// level's queue; a timer's: timer.Wrap; a half message's: txn.AsHalf),
// the pending timers' quota, the dedup keys (Claim), the transaction
// quota, one write of every message not a duplicate (Store.Put or
// PutBatch) and the keys' settlement (Settle). A result names a timer by
// its id and its destination queue, a half message by its transaction,
// a delayed message by its destination queue (offset -1 until it is
// delivered or committed). Every time is the Service's clock's, read once
// per send.
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
// property, indexed by the store — and Service.Claim asks the store
// (Config.FindDedup, then Found) for a key the table does not hold,
// after a restart or once Expire let it go. The dedup window
// (Config.DedupWindow, the broker's) bounds a key's life: a settled key
// stored before the window's start is Unknown, so a send after the
// window is a new send. The Table reads neither the clock nor
// a random source: every time is its caller's (the Service's clock, read
// once per send; Expire's pass).
//
// The dedup window's expiry is a leader's periodic pass the broker runs
// (Service.Expire, every minute); a topic's deletion drops its keys
// (Service.DropTopic, under the topic gate).
//
// # Locks
//
// The Service adds no lock of its own (its round-robin counter is
// atomic): a send holds the read side of the broker's topic gate
// (Config.Gate) from the topic's lookup across its write. Table has one
// lock (Table.Lock), which guards its entries: Lookup, Found, Claim and
// Release need it held (Service.Claim holds it across a send's claims,
// including the store lookups of unknown keys, Config.FindDedup); Settle,
// Expire and DropTopic take it. It comes after the topic gate and before
// the store; no other family's lock is taken under it. A send calls the
// registry (its lock), the transaction family's Reserve and the timer
// family's Sent under the gate but never under the table's lock. Its
// place among the broker's locks is in ARCHITECTURE.md.
package send
