// Package peer carries the Raft messages of a shard's replicas between
// nodes: the network side of storage/shard's Transport, over HTTP/2
// without TLS (h2c) on the peer port. Transport sends a node's messages;
// Handler receives them and hands each to the local replica's
// Shard.Step; NewServer builds the peer port's server and Client an h2c
// client for it (the server also forwards client requests to the
// leader's peer address with it).
//
// The peer port also serves, outside this package, GET /raft/v1/copy
// (CopyPath): a copy of the leader's data (package shard's copies, a tar
// stream) that a joining replica starts from; and the client requests a
// follower forwards to the leader (server's cluster.go).
//
// The package knows raftpb, not the shard: it imports nothing of the
// module's storage, so it stays a leaf of the transport (its tests run
// real shards).
//
// # Wire format
//
// Messages travel in the body of POST /raft/v1/messages (MessagesPath),
// framed as
//
//	magic    4 bytes  "MQRF"
//	version  1 byte   1
//	then, once per message:
//	length   uvarint  the message's size in bytes, 1 or more, minimally encoded
//	message  length   a raftpb.Message in protobuf (proto.Marshal)
//
// The decoder is strict: an unknown magic or version, a length that is
// cut short, overflows, is not the shortest encoding or is 0, a message
// that does not unmarshal, or one this node must not take — addressed to
// another node, from 0, from itself or from one of raft's local ids, or
// of a type replicas do not exchange (MsgProp: proposals are never
// forwarded; the local types such as MsgHup) — is refused. A new framing
// takes a new version byte, and a node refuses what it does not know, so
// replicas are upgraded with the same version on both ends.
//
// # Streams
//
// The Transport keeps one stream open to each peer: a request with
// Content-Type application/x-mqgate-raft-stream (StreamContentType),
// over HTTP/2 only (an HTTP/1.1 one is a 505). The handler checks the
// secret, answers 200 at once and then reads the body as it arrives,
// stepping each message when it has read it; the body never ends while
// the stream is in use. A message that does not frame, decode or pass the
// checks above ends the stream: the handler writes why into its answer
// and ends it (the messages before it were stepped), and the sender
// opens a new stream. No message may be larger than
// HandlerOptions.MaxBodyBytes (64 MiB). One request per batch of messages
// cost the leader about a third of its CPU at a few thousand replicated
// sends a second (an HTTP/2 request each way per append and per answer:
// headers, a stream, a handler goroutine, a 204); a stream costs a DATA
// frame.
//
// A request with Content-Type application/x-mqgate-raft (ContentType) is
// a batch instead: its body is one framing as above with at least one
// message and nothing after the last, at most MaxBodyBytes (else a 413);
// it is stepped whole or, when anything in it is refused, not at all
// (400), and answered 204. Tools and tests send batches; the Transport
// does not.
//
// # Sending: queues, batches, drops and backoff
//
// Send never blocks (the shard's node loop calls it): each message goes
// into its peer's queue — one queue and one goroutine per peer, bounded
// in messages (Options.QueueMessages, 4096) and in bytes of entry and
// snapshot data (Options.QueueBytes, 64 MiB) — or, when that is full, is
// dropped and counted (Stats.Dropped); a message to an id with no peer is
// counted too (Stats.Unknown). Raft retransmits whatever is lost: it
// resends unacknowledged appends and heartbeats on its own timers. The
// peer's goroutine takes everything queued, encodes it into one batch of
// at most Options.MaxBatchBytes (8 MiB; a single larger message goes
// alone) and writes it into the peer's stream, on the connection it keeps
// to the peer: HTTP/2 over one long-lived TCP connection, pinged when
// silent so a vanished peer is noticed. A message counts as sent
// (Stats.Sent) once written into a stream the peer accepted (its 200),
// not once stepped: a stream that breaks loses what was in flight, and
// raft resends it. Large messages (MsgApp with many entries, MsgSnap)
// take the same path; raft's MaxSizePerMsg keeps appends to about 1 MiB.
//
// A stream that fails — the peer down or refusing (no 200 within
// Options.RequestTimeout), a write the peer does not take within
// RequestTimeout (it stopped reading: flow control holds the write), the
// peer ending the stream — is cancelled; the batch being written is
// dropped and counted (Stats.Errors, Stats.Failed), logged at debug at
// most once every few seconds per peer, and reported through
// Options.Unreachable so the shard can tell raft (ReportUnreachable: the
// leader then probes the peer instead of streaming to it). The goroutine
// then waits — BackoffMin (50 ms) doubling to BackoffMax (1 s), jittered —
// before it opens the next stream, and what Send queues meanwhile waits
// in the queue until it overflows. A success resets the wait. A stream
// found ended while idle (the peer restarted) is replaced without a
// loss or a wait.
//
// Cancelling a request does not wake net/http's HTTP/2 client while it
// waits for flow control to write a request body once the answer has
// come; closing the answer's body does, so a stream's cancellation
// closes it (context.AfterFunc).
//
// Messages are marshalled in the peer's goroutine, after Send returned:
// the caller must not change them afterwards, which raft never does.
// AddPeer, RemovePeer and SetPeers change the peers at run time (a peer
// moved to another address is restarted there, its queue dropped). Close
// cancels the requests under way, stops every goroutine and closes the
// connections.
//
// # What is authenticated, and what is not
//
// With a cluster secret (Options.Secret, HandlerOptions.Secret) every
// request carries "Authorization: Bearer <secret>" and the handler
// refuses one without it with a 401, comparing in constant time
// (Authorized: both sides hashed, so not even the length shows). Without
// a secret anyone who reaches the peer port can step messages into the
// replica — elect themselves, append entries — so a cluster always sets
// one. The secret authenticates the sender as a member of the cluster,
// not as a particular node: the messages' From fields are trusted.
// Without TLS nothing is encrypted: h2c is cleartext, so the secret and
// every message can be read, and replayed, by whoever sees the traffic;
// such a peer port belongs on a private network or behind a tunnel. With
// ServerTLS and ClientTLS (the server's --peer-tls-* flags) the peer port
// speaks mutual TLS 1.3 with HTTP/2: every replica presents a certificate
// the cluster's CA signed and refuses a peer that does not, so only
// holders of such a key pair can step messages into a replica, and the
// secret, when set as well, travels encrypted. A Certs holds the key pair
// and CA pool in force and can be replaced while the port serves (the
// server re-reads the files when they change): the peer listener's
// handshakes (Certs.ServerTLS) and the dials of a Transport or
// ClientCerts (Options.Certs) look them up each time, so new connections
// use a rotated certificate or bundle and open ones keep theirs.
//
// Client's requests carry the same header, replacing an Authorization
// header the request had: a server that forwards a client's request to
// the leader moves the client's credentials to a header of its own
// first, and the leader checks Authorized before trusting it.
package peer
