// Package auth holds mqgate's accounts and permissions: the ACL file,
// authentication of HTTP requests (Basic and bearer JWT), the failure
// limiter, and the permission check the api package asks for every route.
// It knows nothing of HTTP routes; api/auth.go maps each route to the
// permissions it needs.
//
// # The ACL file
//
// The file (--acl-file) is RocketMQ's plain_acl.yml, one YAML mapping:
//
//	globalWhiteRemoteAddresses: ["127.0.0.1", "10.0.*"]   # optional
//	accounts:
//	  - accessKey: billing-worker
//	    secretKeyHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$…"
//	    whiteRemoteAddress: "10.0.1.*"                      # optional
//	    admin: false
//	    defaultTopicPerm: DENY
//	    defaultGroupPerm: SUB
//	    topicPerms: ["orders=SUB", "audit=PUB|SUB"]
//	    groupPerms: ["billing=SUB"]
//
// Top-level keys: globalWhiteRemoteAddresses (a list of address patterns),
// accounts (a list, required; an empty list denies everything) and
// dataVersion (written by RocketMQ's broker; ignored). Account keys:
//
//   - accessKey: the account's name, 1-128 printable ASCII characters
//     without spaces or ':'; unique in the file.
//   - secretKey: the secret in clear, 8-1024 bytes; or secretKeyHash: an
//     argon2id hash in PHC string form ($argon2id$v=19$m=…,t=…,p=…$salt$hash,
//     as `argon2 SALT -id -e` prints) or a bcrypt hash ($2a$, $2b$, $2y$, as
//     `htpasswd -nbB` prints). Not both. Either may be a list of secrets
//     that are all accepted, to rotate a key without a gap: add the new
//     one, move the clients, remove the old one. An account with neither
//     signs in with bearer tokens only.
//   - whiteRemoteAddress: an address pattern, or a list of them.
//   - admin: true grants every operation on every resource.
//   - defaultTopicPerm, defaultGroupPerm: DENY (the default when absent),
//     PUB, SUB or PUB|SUB, for the topics and groups not listed.
//   - topicPerms, groupPerms: "name=PERM" entries; a name appears once.
//   - requestsPerSecond, messagesPerSecond, maxLongPolls (mqgate's
//     extensions): the account's abuse limits — API requests per second,
//     messages sent per second (a batch of n counts n), pulls waiting at
//     once. Absent: the server's flag default; 0: unlimited.
//
// Every other key, a permission other than those four, a repeated
// accessKey or resource, a malformed hash or address pattern, a second
// YAML document is an error naming the line. Keys are case-sensitive.
//
// Address patterns are RocketMQ's plus CIDR: "*" (any), an exact IPv4 or
// IPv6 address, a CIDR prefix ("10.0.0.0/8", "fd00::/8"), IPv4 wildcards
// ("10.0.*", "10.0.*.*"), a range in one segment with wildcards after it
// ("10.0.1.1-10", "10.0.1-3.*") and a set of last segments
// ("10.0.1.{1,2,3}"). IPv4-mapped IPv6 peers match as IPv4.
//
// # Where mqgate differs from RocketMQ
//
//   - White lists only restrict. In RocketMQ 4.x a request from a
//     globalWhiteRemoteAddresses address skips authentication, and one from
//     an account's whiteRemoteAddress skips the signature check. mqgate
//     never trusts an address alone: when globalWhiteRemoteAddresses is
//     given, requests from other addresses are refused (403) before any
//     credential is looked at; an account with a whiteRemoteAddress may be
//     used only from a matching address (403 otherwise), and every request
//     is authenticated. The address is the TCP peer's; X-Forwarded-For and
//     similar headers are ignored.
//   - admin grants everything, PUB and SUB on every topic and group
//     included (RocketMQ applies an admin's resource lists when it has
//     some): an admin can reconfigure any resource anyway.
//   - Secrets travel as HTTP Basic credentials or bearer tokens over the
//     connection (use TLS, or a TLS-terminating proxy, off the host), not
//     as RocketMQ's request signatures; secretKeyHash and secret lists are
//     mqgate's additions. The SQS endpoint (package server/sqs) is the
//     exception: its clients sign with AWS SigV4, keyed by an account's
//     secretKey (Account.SigningSecrets; a hashed secret cannot sign).
//
// # File mode
//
// A world-writable file is refused (anyone could make themselves admin),
// and so is a file holding a plain secretKey that group or others may read:
// chmod 600 it, or use secretKeyHash. A file of hashes only that others may
// read loads with a warning (offline guessing of weak secrets). A refused
// or invalid file fails the start; on a reload it is not put in force.
//
// # Reload
//
// A File polls the file every second (see File for why polling) and puts
// a new version in force by swapping one immutable *ACL: requests in
// flight finish with the version they started with, none is dropped. A
// version that does not load leaves the last good one in force, is logged
// once, and /readyz says so while it lasts: "ok (acl file PATH: …; serving
// the version loaded at …)".
//
// # Authentication
//
// HTTP Basic: "Authorization: Basic base64(accessKey:secretKey)" (curl -u).
// Bearer: "Authorization: Bearer <JWT>" when a JWTVerifier is configured,
// with an HMAC secret or a JWKS URL (the key set is cached, refreshed every
// five minutes and fetched again, at most every 30 s, for an unknown key
// id); exp is required, nbf and iat are checked with 30 s of leeway, iss
// and aud against the configured values (both required with a JWKS URL),
// and the account claim (sub by default) must name an account of the ACL.
//
// Client certificate: with TLS and --tls-client-ca-file, a request
// without an Authorization header on a connection whose client
// certificate the handshake verified against those CAs (for client
// authentication) signs in as the account its subject Common Name names
// (method "certificate"); a CN naming no account is a 401. The CN, not a
// SAN, because it is what `openssl req -subj /CN=billing-worker` and most
// internal CAs set for a client, and an accessKey is no host name. Any
// certificate those CAs sign for CN=x is account x, so they must issue
// certificates for mqgate clients only. An Authorization header wins
// over the certificate. The white lists apply as to every sign-in.
//
// Secrets are compared in constant time: a plain secret by the SHA-256 of
// both sides, hashes by their own algorithms. An unknown accessKey is
// checked against a dummy secret of the same kind and cost as the file's
// first hashed account, so that it costs what a wrong secret costs, and it
// gets the same answer. A wrong secret of an account of plain secrets is
// checked against that dummy too before it is refused, so every failure
// costs one password hash: the time of a failure tells neither whether
// the account exists nor whether its secret is plain or hashed (a right
// plain secret is answered without one). Keep the hashes of one file at
// one cost: an account whose hash is dearer than the first one's, or that
// lists several hashes, takes longer to refuse. A password hash that verified is remembered for a
// minute (an HMAC of accessKey and secret, with a per-process key, in a
// bounded LRU that a reload empties), so that Basic clients pay bcrypt or
// argon2id once a minute instead of per request; at most max(2, GOMAXPROCS)
// hash checks run at once. No secret, hash or Authorization value is ever
// logged or put into an error.
//
// # Slowing guessers
//
// Failed attempts are counted per account (mqgate_auth_failures_total)
// and limited per (account, address) with token buckets of
// --auth-failures-per-minute (burst and per-minute refill); accessKeys
// that name no account (and malformed headers, bad tokens) count together
// per address. The limiter is asked only after the credentials were
// checked: correct credentials are never slowed nor refused, so a guesser
// cannot lock the real user out, even from the same address (behind a
// proxy every client has the proxy's). A failure over the limit is
// answered late (100 ms doubling up to 3 s) with 429
// too-many-auth-failures and Retry-After. Once an address used up its
// unknown-accessKey tries, every failure from it is over the limit, so
// that 401 or 429 does not tell a guesser which names are accounts.
// IPv6 peers count per /64. The table is bounded (16384 pairs).
//
// Listeners that verify their own signatures (the SQS endpoint's AWS
// SigV4) report their failures through Guard.SignatureFailed into the
// same metrics (reason bad_signature) and the same limiter, so a guesser
// is slowed alike on every listener; over the limit the caller answers in
// its own protocol's throttling shape.
package auth
