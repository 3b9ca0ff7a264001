package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mqgate/mqgate/api"
	"github.com/mqgate/mqgate/server/auth"
	"github.com/mqgate/mqgate/server/broker"
	"github.com/mqgate/mqgate/storage"
	"github.com/mqgate/mqgate/storage/schedule"
)

// Config is the whole process configuration. Every field that
// is a flag has an environment twin; flags win. The struct tags are read by
// the command line parser (kong); their ${…} defaults come from
// DefaultConfig through FlagDefaults, so defaults live in one place.
type Config struct {
	// Listen is the HTTP listen address (host:port; port 0 picks a free one).
	// Without ACLFile only a loopback address is accepted, unless
	// InsecureNoAuth.
	Listen string `help:"HTTP listen address (host:port). Without --acl-file only a loopback address (127.0.0.1, ::1, localhost) is accepted, unless --insecure-no-auth." env:"MQGATE_LISTEN" default:"${listen}"`
	// ACLFile is the RocketMQ plain_acl.yml of accounts and permissions
	// (server/auth/doc.go). Given, every API request is authenticated and
	// authorized; the file is reloaded when it changes.
	ACLFile string `name:"acl-file" help:"Accounts and permissions (RocketMQ plain_acl.yml; reloaded when it changes). Given, every API request needs credentials." env:"MQGATE_ACL_FILE"`
	// InsecureNoAuth allows a non-loopback Listen without ACLFile.
	InsecureNoAuth bool `name:"insecure-no-auth" help:"Allow a non-loopback --listen without --acl-file: anyone who can reach the port can do anything." env:"MQGATE_INSECURE_NO_AUTH"`
	// JWTSecret is the HMAC key of bearer JWTs (HS256/384/512), at least
	// 32 bytes. Needs ACLFile (the token's account claim names an account).
	JWTSecret string `name:"jwt-secret" help:"HMAC key (32+ bytes) of bearer JWTs (HS256, HS384, HS512); prefer the environment variable to the flag." env:"MQGATE_JWT_SECRET"`
	// JWTJWKSURL is the JSON Web Key Set of an identity provider (https,
	// or http on loopback); needs JWTIssuer and JWTAudience.
	JWTJWKSURL string `name:"jwt-jwks-url" help:"JWKS URL of the identity provider signing bearer JWTs (RS*, PS*, ES*, EdDSA); needs --jwt-issuer and --jwt-audience." env:"MQGATE_JWT_JWKS_URL"`
	// JWTIssuer, when set, must equal a token's iss claim.
	JWTIssuer string `name:"jwt-issuer" help:"Required iss claim of bearer JWTs." env:"MQGATE_JWT_ISSUER"`
	// JWTAudience, when set, must be in a token's aud claim.
	JWTAudience string `name:"jwt-audience" help:"Required aud claim of bearer JWTs." env:"MQGATE_JWT_AUDIENCE"`
	// JWTAccountClaim is the claim naming the token's account.
	JWTAccountClaim string `name:"jwt-account-claim" help:"Claim of bearer JWTs that names the account (an accessKey of the ACL file)." env:"MQGATE_JWT_ACCOUNT_CLAIM" default:"${jwt_account_claim}"`
	// AuthFailuresPerMinute is how many failed authentications one account
	// (or the unknown accessKeys together) may have per minute from one
	// address (a token bucket of that burst) before its failures are
	// slowed: answered late with 429. Correct credentials never are.
	AuthFailuresPerMinute int `name:"auth-failures-per-minute" help:"Failed authentications one account (or the unknown accessKeys together) may have per minute from one address before its failures get 429, answered late; correct credentials are never slowed." env:"MQGATE_AUTH_FAILURES_PER_MINUTE" default:"${auth_failures_per_minute}"`
	// AdminListen, when set, serves /metrics and /debug/pprof (with
	// Pprof), and /livez and /readyz, on their own address without
	// authentication, and no longer on Listen.
	AdminListen string `name:"admin-listen" help:"Serve /metrics and /debug/pprof (and /livez, /readyz) on this address, without authentication, instead of on --listen; keep it private." env:"MQGATE_ADMIN_LISTEN"`
	// NodeID, Peers and ClusterSecret run this process as one replica of
	// a cluster (cluster.go): its store is replicated by Raft over the
	// peers' addresses; without NodeID it is a single node.
	NodeID uint64 `name:"node-id" help:"This replica's id in --peers (1, 2, 3, …); set, mqgate runs as one replica of a cluster." env:"MQGATE_NODE_ID"`
	// Peers lists every replica as id=host:port (this one's included):
	// the address of its peer port (Raft traffic and forwarded requests).
	Peers string `name:"peers" help:"Every replica of the cluster as id=host:port of its peer port, this one included, e.g. 1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103." env:"MQGATE_PEERS"`
	// ClusterSecret, when set, must be presented by every peer request
	// (the peer port is cleartext: keep it on a private network).
	ClusterSecret string `name:"cluster-secret" help:"Shared secret every request to the peer port must carry (the peer port is cleartext HTTP/2: keep it on a private network); prefer the environment variable." env:"MQGATE_CLUSTER_SECRET"`
	// PeerTLSCertFile, PeerTLSKeyFile and PeerTLSCAFile turn on mutual
	// TLS on the peer port (peer.ServerTLS): every replica presents a
	// key pair the CA signed and accepts only peers that do; re-read when
	// the files change (openPeerTLS).
	PeerTLSCertFile string `name:"peer-tls-cert-file" help:"PEM certificate of this replica on the peer port (mutual TLS, with --peer-tls-key-file and --peer-tls-ca-file): signed by the cluster's CA, for server and client authentication, naming this replica's peer host." env:"MQGATE_PEER_TLS_CERT_FILE" type:"existingfile"`
	PeerTLSKeyFile  string `name:"peer-tls-key-file" help:"PEM private key of --peer-tls-cert-file." env:"MQGATE_PEER_TLS_KEY_FILE" type:"existingfile"`
	PeerTLSCAFile   string `name:"peer-tls-ca-file" help:"PEM bundle of the CA that signs every replica's peer certificate; peers without such a certificate are refused." env:"MQGATE_PEER_TLS_CA_FILE" type:"existingfile"`
	// Join starts a new replica with an empty data dir that waits to be
	// added (POST /v1/cluster/learners on the cluster) instead of
	// starting a cluster with Peers.
	Join bool `name:"join" help:"Start an empty replica that waits to be added to a running cluster as a learner (mqgate cluster add-learner) instead of starting a new cluster with --peers." env:"MQGATE_JOIN"`
	// RaftTick is Raft's tick: a leader heartbeats every tick, a follower
	// campaigns after 10 ticks without one.
	RaftTick time.Duration `name:"raft-tick" help:"Raft's tick: heartbeats every tick, an election after 10 ticks without a leader." env:"MQGATE_RAFT_TICK" default:"${raft_tick}"`
	// SQSListen, when set, serves the SQS-compatible API (package
	// server/sqs, the README's "SQS API") on its own address.
	SQSListen string `name:"sqs-listen" help:"Serve the SQS-compatible API (AWS SDKs, the AWS CLI) on this address, e.g. 127.0.0.1:9324; off when empty. With --acl-file, requests must be signed (SigV4) with an account's secretKey." env:"MQGATE_SQS_LISTEN"`
	// SQSMaxWaitingReceives caps the ReceiveMessage calls of --sqs-listen
	// waiting at once (WaitTimeSeconds > 0); more get RequestThrottled,
	// which the AWS SDKs retry with backoff.
	SQSMaxWaitingReceives int `name:"sqs-max-waiting-receives" help:"Most SQS ReceiveMessage long polls (WaitTimeSeconds > 0) waiting at once on --sqs-listen; more get the SQS error RequestThrottled, which the AWS SDKs and CLI retry with backoff." env:"MQGATE_SQS_MAX_WAITING_RECEIVES" default:"${sqs_max_waiting_receives}"`
	// TLSCertFile and TLSKeyFile are the PEM certificate chain and
	// private key of the server (both or neither): given, --listen and
	// --admin-listen speak HTTPS only (TLS 1.2+), and the pair is reloaded
	// when the files change (tls.go).
	TLSCertFile string `name:"tls-cert-file" help:"PEM certificate (chain) of the server; with --tls-key-file, --listen and --admin-listen serve HTTPS only (TLS 1.2+), reloaded when the files change." env:"MQGATE_TLS_CERT_FILE"`
	TLSKeyFile  string `name:"tls-key-file" help:"PEM private key of --tls-cert-file (keep it 0600)." env:"MQGATE_TLS_KEY_FILE"`
	// TLSClientCAFile is a PEM bundle of the CAs whose client
	// certificates are accepted; a verified certificate's subject Common
	// Name is the accessKey of the account it signs in as. Needs TLS and
	// ACLFile.
	TLSClientCAFile string `name:"tls-client-ca-file" help:"PEM CA bundle of client certificates; a verified certificate signs in as the account its subject CN names (needs --tls-cert-file and --acl-file; use a CA for mqgate clients only)." env:"MQGATE_TLS_CLIENT_CA_FILE"`
	// AllowedHosts are the host names requests may carry in Host besides
	// IP addresses, localhost names and the hosts of Listen and
	// AdvertiseAddr; "*" allows any (browser.go).
	AllowedHosts []string `name:"allowed-hosts" help:"Host names clients (and proxies) use for this server, comma-separated; requests for other names get 421 (DNS rebinding). IP addresses, localhost and the --listen/--advertise-addr hosts are always allowed; * allows any." env:"MQGATE_ALLOWED_HOSTS" sep:","`
	// CORSAllowedOrigins are the web origins (scheme://host[:port]) whose
	// pages may call the API; state-changing requests of other origins
	// are refused. "*" allows any.
	CORSAllowedOrigins []string `name:"cors-allowed-origins" help:"Web origins (https://app.example) whose pages may call the API (CORS); POST, PUT, PATCH and DELETE with another Origin get 403 (clients without Origin, like curl, are not affected). Default: none but the console's own." env:"MQGATE_CORS_ALLOWED_ORIGINS" sep:","`
	// AdvertiseAddr is the host:port clients use to reach this server (a
	// proxy's or a DNS name); its host is allowed in Host headers.
	AdvertiseAddr string `help:"host:port clients use to reach this server (behind a proxy or a DNS name); its host is allowed in Host headers. Message ids do not carry it: they name the data directory's store id." env:"MQGATE_ADVERTISE_ADDR"`
	// DataDir is the directory of the store.
	DataDir string `help:"Directory of the message store." env:"MQGATE_DATA_DIR" default:"${data_dir}"`
	// Flush is "sync" (a send returns after the fsync that covers it) or
	// "async" (flush every 500 ms).
	Flush string `help:"Flush mode: sync (fsync before the 200) or async (periodic)." env:"MQGATE_FLUSH" enum:"sync,async" default:"${flush}"`
	// SegmentSize is the CommitLog segment size in bytes.
	SegmentSize ByteSize `help:"CommitLog segment size (e.g. 1GiB)." env:"MQGATE_SEGMENT_SIZE" default:"${segment_size}"`
	// Retention is how long CommitLog data is kept (RocketMQ
	// fileReservedTime): segments last written longer ago are deleted,
	// consumed or not (the skip is counted per group). A topic's
	// retentionHours overrides it for that topic's messages.
	Retention time.Duration `help:"How long CommitLog data is kept (fileReservedTime); a topic's retentionHours overrides it for its messages." env:"MQGATE_RETENTION" default:"${retention}"`
	// RetentionInterval is how often the retention cleaner runs.
	RetentionInterval time.Duration `help:"How often the retention cleaner runs." env:"MQGATE_RETENTION_INTERVAL" default:"${retention_interval}"`
	// DiskMaxUsedRatio is the used fraction of the data dir's file system
	// above which retention deletes, one per pass, the oldest segments
	// every group has consumed, before their time.
	DiskMaxUsedRatio float64 `help:"Disk used fraction above which retention deletes fully consumed segments early (diskMaxUsedSpaceRatio; 1 = never)." env:"MQGATE_DISK_MAX_USED_RATIO" default:"${disk_max_used_ratio}"`
	// DiskSendCeiling is the used fraction above which sends are refused
	// with 507 disk-full (acks, nacks and commits go on).
	DiskSendCeiling float64 `help:"Disk used fraction above which sends get 507 disk-full; acks, nacks, lease changes and offset commits go on." env:"MQGATE_DISK_SEND_CEILING" default:"${disk_send_ceiling}"`
	// DiskSystemCeiling is the used fraction above which acks, nacks,
	// commits and the broker's own records are refused too.
	DiskSystemCeiling float64 `help:"Disk used fraction above which acks, nacks, commits and the broker's own records get 507 too (the headroom above --disk-send-ceiling is theirs)." env:"MQGATE_DISK_SYSTEM_CEILING" default:"${disk_system_ceiling}"`
	// DiskPressureDelete is RocketMQ's behaviour: above DiskMaxUsedRatio
	// the oldest segment is deleted even if groups have not consumed it
	// (counted per group in mqgate_retention_dropped_unconsumed_total).
	DiskPressureDelete bool `help:"Above --disk-max-used-ratio delete the oldest segments even if groups have not consumed them (RocketMQ's behaviour; counted per group). Off: disk pressure never deletes unconsumed messages." env:"MQGATE_DISK_PRESSURE_DELETE"`
	// DiskCheckInterval is how often the disk's used fraction is sampled.
	DiskCheckInterval time.Duration `help:"How often the disk's used fraction is sampled for the ceilings." env:"MQGATE_DISK_CHECK_INTERVAL" default:"${disk_check_interval}"`
	// ScrubRate is how many bytes per second the background scrubber
	// re-reads and verifies (CRC-32C of every frame) of the sealed
	// CommitLog segments; 0 disables it.
	ScrubRate ByteSize `help:"Rate at which the background scrubber re-reads and verifies the durable CommitLog (e.g. 16MiB, per second; 0 disables it)." env:"MQGATE_SCRUB_RATE" default:"${scrub_rate}"`
	// DelayLevels is the delay of each level, level 1 first.
	DelayLevels DelayLevels `help:"Delay of each delay level, space- or comma-separated (e.g. \"1s 5s 10s\"; ms allowed)." env:"MQGATE_DELAY_LEVELS" default:"${delay_levels}"`
	// DatabaseURL is the PostgreSQL mirror's URL; empty runs embedded.
	DatabaseURL string `help:"PostgreSQL URL of the offsets/DLQ mirror (empty: embedded mode)." env:"MQGATE_DATABASE_URL,DATABASE_URL"`
	// SeedOffsets commits the offsets mirrored in PostgreSQL into the data
	// dir at start (disaster recovery for a lost or restored disk).
	SeedOffsets bool `help:"Commit the consumer offsets mirrored in PostgreSQL into this data dir at start (disaster recovery)." env:"MQGATE_SEED_OFFSETS"`
	// AutoCreate creates unknown topics on first send.
	AutoCreate bool `help:"Create unknown topics on first send (and groups on first pull, see --auto-create-groups)." env:"MQGATE_AUTO_CREATE" negatable:"" default:"${auto_create}"`
	// AutoCreateGroups creates unknown groups on first pull (with AutoCreate).
	AutoCreateGroups bool `help:"With --auto-create, also create unknown groups on first pull." env:"MQGATE_AUTO_CREATE_GROUPS" negatable:"" default:"${auto_create_groups}"`
	// MessageTrace runs the message trace's follower, which indexes
	// deliveries, acks and push outcomes for GET
	// /v1/messages/{messageId}/trace (off, the default: traces list only
	// what the message's own records hold). Off by default as in RocketMQ
	// (traceTopicEnable): the follower costs about a fifth of the server's
	// CPU under a pull + ack load (BENCHMARKS.md).
	MessageTrace bool `help:"Trace deliveries, acks and push outcomes for GET /v1/messages/{messageId}/trace (a background follower of the lease and progress records, about a fifth of the CPU of a pull + ack load; off, the default, traces list only what the message's copies and transaction records hold)." env:"MQGATE_MESSAGE_TRACE" negatable:"" default:"${message_trace}"`
	// MaxMessageSize is the largest message body in bytes.
	MaxMessageSize ByteSize `help:"Largest message body (e.g. 4MiB)." env:"MQGATE_MAX_MESSAGE_SIZE" default:"${max_message_size}"`
	// MaxRequestSize is the largest JSON send request body in bytes.
	MaxRequestSize ByteSize `help:"Largest JSON send request body (base64 bodies and batches)." env:"MQGATE_MAX_REQUEST_SIZE" default:"${max_request_size}"`
	// MaxHeaderBytes caps the request header block in bytes (431 above).
	MaxHeaderBytes ByteSize `help:"Largest request header block." env:"MQGATE_MAX_HEADER_BYTES" default:"${max_header_bytes}"`
	// MaxWaiters caps concurrent long polls (429 above).
	MaxWaiters int `help:"Most concurrent long-polling pulls; more get 429." env:"MQGATE_MAX_WAITERS" default:"${max_waiters}"`
	// RequestsPerSecond is each account's default API request rate (an
	// account of the ACL file may set requestsPerSecond); 0 is unlimited.
	// Without authentication all callers are one account.
	RequestsPerSecond float64 `help:"Default API request rate of each account (requestsPerSecond in the ACL file overrides it; 0 = unlimited; without --acl-file all callers are one account); over it: 429 rate-limited with Retry-After." env:"MQGATE_REQUESTS_PER_SECOND" default:"${requests_per_second}"`
	// MessagesPerSecond is each account's default rate of messages sent
	// (messagesPerSecond in the ACL file); 0 is unlimited.
	MessagesPerSecond float64 `help:"Default rate of messages each account may send, a batch of n counting n (messagesPerSecond in the ACL file overrides it; 0 = unlimited)." env:"MQGATE_MESSAGES_PER_SECOND" default:"${messages_per_second}"`
	// MaxLongPolls is each account's default number of pulls waiting at
	// once (maxLongPolls in the ACL file); 0 is unlimited.
	MaxLongPolls int `name:"max-long-polls" help:"Default number of pulls one account may have waiting at once (maxLongPolls in the ACL file overrides it; 0 = unlimited); more get 429 too-many-waiters." env:"MQGATE_MAX_LONG_POLLS" default:"${max_long_polls}"`
	// MaxTopics, MaxQueues, MaxQueuesPerTopic, MaxGroups,
	// MaxPushEndpoints and MaxPendingTimers are the broker's quotas
	// (server/broker/quota.go): creating past one is a 409 quota-exceeded;
	// 0 is unlimited.
	MaxTopics         int `help:"Most topics (explicit or auto-created); more get 409 quota-exceeded (0 = unlimited)." env:"MQGATE_MAX_TOPICS" default:"${max_topics}"`
	MaxQueues         int `help:"Most queues of all topics together (each is a file and a memory map); 0 = unlimited." env:"MQGATE_MAX_QUEUES" default:"${max_queues}"`
	MaxQueuesPerTopic int `help:"Most queues of one topic (at most 1024); 0 = 1024." env:"MQGATE_MAX_QUEUES_PER_TOPIC" default:"${max_queues_per_topic}"`
	MaxGroups         int `help:"Most consumer groups (explicit or auto-created); 0 = unlimited." env:"MQGATE_MAX_GROUPS" default:"${max_groups}"`
	MaxPushEndpoints  int `help:"Most groups with a push (webhook) endpoint; 0 = unlimited." env:"MQGATE_MAX_PUSH_ENDPOINTS" default:"${max_push_endpoints}"`
	MaxPendingTimers  int `help:"Most timers waiting to fire (deliverAt / delayMs); more get 409 quota-exceeded (0 = unlimited)." env:"MQGATE_MAX_PENDING_TIMERS" default:"${max_pending_timers}"`
	// MaxTransactionsPerProducerGroup and MaxPendingTransactions bound the
	// unresolved transactions (each is held in memory until it ends): a
	// transactional send past one is a 409 quota-exceeded; 0 is unlimited.
	MaxTransactionsPerProducerGroup int `name:"max-transactions-per-producer-group" help:"Most unresolved transactions (half messages) of one producer group; more get 409 quota-exceeded (0 = unlimited)." env:"MQGATE_MAX_TRANSACTIONS_PER_PRODUCER_GROUP" default:"${max_transactions_per_producer_group}"`
	MaxPendingTransactions          int `name:"max-pending-transactions" help:"Most unresolved transactions of all producer groups together; more get 409 quota-exceeded (0 = unlimited)." env:"MQGATE_MAX_PENDING_TRANSACTIONS" default:"${max_pending_transactions}"`
	// MaxInstancesPerGroup bounds the consumer instances (client ids) one
	// broadcasting group knows at once: a new one past it is a 409
	// quota-exceeded; 0 is unlimited.
	MaxInstancesPerGroup int `name:"max-instances-per-group" help:"Most consumer instances (X-Mqgate-Client-Id) one broadcasting group knows at once; a new one past it gets 409 quota-exceeded (an idle one is forgotten after the group's instanceIdleMs; 0 = unlimited)." env:"MQGATE_MAX_INSTANCES_PER_GROUP" default:"${max_instances_per_group}"`
	// TransactionMaxChecks is how many checks of an unresolved transaction
	// are handed out before it is rolled back (RocketMQ's
	// transactionCheckMax); TransactionCheckInterval the least time
	// between two of them (transactionCheckInterval).
	TransactionMaxChecks     int           `name:"transaction-max-checks" help:"Checks of an unresolved transaction handed out to its producer group before it is rolled back (transactionCheckMax, 1-1000)." env:"MQGATE_TRANSACTION_MAX_CHECKS" default:"${transaction_max_checks}"`
	TransactionCheckInterval time.Duration `name:"transaction-check-interval" help:"Least time between two checks of an unresolved transaction (transactionCheckInterval; a send's longer checkAfterMs applies instead)." env:"MQGATE_TRANSACTION_CHECK_INTERVAL" default:"${transaction_check_interval}"`
	// ReadHeaderTimeout bounds reading a request's headers (slowloris).
	ReadHeaderTimeout time.Duration `help:"Time to read request headers." env:"MQGATE_READ_HEADER_TIMEOUT" default:"${read_header_timeout}"`
	// ReadTimeout bounds reading a whole request, body included.
	ReadTimeout time.Duration `help:"Time to read a whole request." env:"MQGATE_READ_TIMEOUT" default:"${read_timeout}"`
	// WriteTimeout bounds writing a response; long polls extend their own.
	WriteTimeout time.Duration `help:"Time to write a response (long polls get waitMs more)." env:"MQGATE_WRITE_TIMEOUT" default:"${write_timeout}"`
	// IdleTimeout bounds an idle keep-alive connection.
	IdleTimeout time.Duration `help:"Keep-alive idle timeout." env:"MQGATE_IDLE_TIMEOUT" default:"${idle_timeout}"`
	// ShutdownDelay is how long, after readiness turns 503, the server
	// keeps its listener open (answering 503 shutting-down) so load
	// balancers notice before connections are refused.
	ShutdownDelay time.Duration `help:"Drain delay between readiness 503 and closing the listener." env:"MQGATE_SHUTDOWN_DELAY" default:"${shutdown_delay}"`
	// ShutdownTimeout bounds waiting for in-flight requests at shutdown.
	ShutdownTimeout time.Duration `help:"Time in-flight requests get to finish at shutdown." env:"MQGATE_SHUTDOWN_TIMEOUT" default:"${shutdown_timeout}"`
	// MetricsMaxLabelValues is the most topics, and the most groups, with
	// metric series of their own; the others (and deleted ones) are summed
	// under topic="_other" / group="_other".
	MetricsMaxLabelValues int `help:"Most topics, and most groups, with metric series of their own; the rest (and deleted ones) are summed under topic/group \"_other\"." env:"MQGATE_METRICS_MAX_LABEL_VALUES" default:"${metrics_max_label_values}"`
	// OTLPEndpoint, when set, exports a server span per HTTP request over
	// OTLP/HTTP to this collector base URL (…/v1/traces is appended).
	OTLPEndpoint string `help:"OpenTelemetry: export a server span per HTTP request over OTLP/HTTP (protobuf) to this collector URL, e.g. http://127.0.0.1:4318 (/v1/traces is appended); empty: off." env:"MQGATE_OTLP_ENDPOINT"`
	// OTelServiceName is the spans' service.name.
	OTelServiceName string `name:"otel-service-name" help:"OpenTelemetry service.name of the exported spans." env:"MQGATE_OTEL_SERVICE_NAME" default:"${otel_service_name}"`
	// OTelSampleRatio is the share of traces sampled that no incoming
	// traceparent decides (parent-based: a sampled parent is followed).
	OTelSampleRatio float64 `name:"otel-sample-ratio" help:"OpenTelemetry: share of new traces sampled (0..1); a request's traceparent decides for its own trace." env:"MQGATE_OTEL_SAMPLE_RATIO" default:"${otel_sample_ratio}"`
	// Pprof serves /debug/pprof/ on the API port.
	Pprof bool `help:"Serve /debug/pprof/ (keep the port private when on)." env:"MQGATE_PPROF"`
	// LogFormat is "auto" (console on a terminal, else json), "console" or "json".
	LogFormat string `help:"Log format: auto, console or json." env:"MQGATE_LOG_FORMAT" enum:"auto,console,json" default:"${log_format}"`
	// LogLevel is the minimum level logged.
	LogLevel string `help:"Minimum log level." env:"MQGATE_LOG_LEVEL" enum:"trace,debug,info,warn,error" default:"${log_level}"`
	// PushDenyCIDRs are address ranges push (webhook) endpoints may never
	// reach, on top of the always-refused link-local, cloud metadata,
	// unspecified and multicast addresses and the gateway's own listener.
	// Loopback and private ranges are allowed unless listed here or
	// refused by PushDenyPrivate. An IPv4 range covers the IPv4-mapped
	// (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d) forms of its addresses.
	PushDenyCIDRs CIDRList `name:"push-deny-cidrs" help:"Address ranges push (webhook) endpoints may not reach, comma- or space-separated (e.g. \"10.20.0.0/16,fd12:3456::/32\"); an IPv4 range also covers its IPv4-mapped and NAT64 forms. See --push-deny-private for loopback and private ranges." env:"MQGATE_PUSH_DENY_CIDRS"`
	// PushDenyPrivate refuses push endpoints on loopback (127.0.0.0/8,
	// ::1), private (10/8, 172.16/12, 192.168/16), carrier-grade NAT
	// (100.64.0.0/10) and unique-local (fc00::/7) addresses, also in their
	// IPv4-mapped and NAT64 forms. Recommended in production.
	PushDenyPrivate bool `name:"push-deny-private" help:"Refuse push (webhook) endpoints on loopback, private, carrier-grade NAT and unique-local addresses of IPv4 and IPv6 (recommended in production)." env:"MQGATE_PUSH_DENY_PRIVATE"`

	// Storage holds advanced storage options (ConsumeQueue and index file
	// sizes: small disks, tests); the flags above set its retention and
	// disk fields. Not a flag.
	Storage storage.Options `kong:"-"`
	// ACLPollInterval is how often the ACL file is looked at (default
	// one second). Not a flag.
	ACLPollInterval time.Duration `kong:"-"`
	// TLSReloadInterval is how often, at most, a handshake looks at the
	// TLS files (default one second). Not a flag.
	TLSReloadInterval time.Duration `kong:"-"`
	// LogOutput receives the logs (default os.Stderr). Not a flag.
	LogOutput io.Writer `kong:"-"`
	// Version is reported by mqgate_build_info and the start-up log. Not a flag.
	Version string `kong:"-"`
	// Commit is the git commit the binary was built from, reported by
	// mqgate_build_info (its revision label) and the start-up log. Not a flag.
	Commit string `kong:"-"`
}

// DefaultConfig returns the configuration with every default filled in;
// it is the one place defaults are written down.
func DefaultConfig() Config {
	var levels DelayLevels
	if err := levels.UnmarshalText([]byte(schedule.DefaultLevels)); err != nil {
		panic(err) // a constant that parses
	}
	return Config{
		Listen:            "127.0.0.1:8080",
		DataDir:           "./data",
		Flush:             "sync",
		SegmentSize:       1 << 30,
		Retention:         72 * time.Hour,
		RetentionInterval: 10 * time.Second,
		DiskMaxUsedRatio:  0.75,
		DiskSendCeiling:   storage.DefaultDiskSendCeiling,
		DiskSystemCeiling: storage.DefaultDiskSystemCeiling,
		DiskCheckInterval: time.Second,
		ScrubRate:         ByteSize(storage.DefaultScrubRate),
		DelayLevels:       levels,
		AutoCreate:        true,
		AutoCreateGroups:  true,
		MessageTrace:      false,
		MaxMessageSize:    4 << 20,
		MaxRequestSize:    8 << 20,
		MaxHeaderBytes:    64 << 10,
		MaxWaiters:        10_000,
		MaxLongPolls:      1_000,

		SQSMaxWaitingReceives: 10_000,

		MaxTopics:         4096,
		MaxQueues:         16384,
		MaxQueuesPerTopic: 1024,
		MaxGroups:         4096,
		MaxPushEndpoints:  256,
		MaxPendingTimers:  10_000_000,

		MaxTransactionsPerProducerGroup: 10_000,
		MaxPendingTransactions:          100_000,
		MaxInstancesPerGroup:            1024,
		TransactionMaxChecks:            broker.DefaultTransactionMaxChecks,
		TransactionCheckInterval:        broker.DefaultTransactionCheckInterval,

		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ShutdownDelay:     0,
		RaftTick:          100 * time.Millisecond,
		ShutdownTimeout:   30 * time.Second,
		LogFormat:         "auto",
		LogLevel:          "info",
		Version:           "dev",
		Commit:            "unknown",

		MetricsMaxLabelValues: 1000,
		OTelServiceName:       "mqgate",
		OTelSampleRatio:       1,
		JWTAccountClaim:       auth.DefaultAccountClaim,
		AuthFailuresPerMinute: auth.DefaultFailuresPerMinute,
	}
}

// FlagDefaults returns c's values as the ${…} variables the flag tags
// reference (use it with kong.Vars(DefaultConfig().FlagDefaults())).
func (c Config) FlagDefaults() map[string]string {
	return map[string]string{
		"listen":               c.Listen,
		"data_dir":             c.DataDir,
		"flush":                c.Flush,
		"segment_size":         c.SegmentSize.String(),
		"retention":            c.Retention.String(),
		"retention_interval":   c.RetentionInterval.String(),
		"disk_max_used_ratio":  strconv.FormatFloat(c.DiskMaxUsedRatio, 'g', -1, 64),
		"disk_send_ceiling":    strconv.FormatFloat(c.DiskSendCeiling, 'g', -1, 64),
		"disk_system_ceiling":  strconv.FormatFloat(c.DiskSystemCeiling, 'g', -1, 64),
		"disk_check_interval":  c.DiskCheckInterval.String(),
		"scrub_rate":           c.ScrubRate.String(),
		"delay_levels":         c.DelayLevels.String(),
		"auto_create":          strconv.FormatBool(c.AutoCreate),
		"auto_create_groups":   strconv.FormatBool(c.AutoCreateGroups),
		"message_trace":        strconv.FormatBool(c.MessageTrace),
		"max_message_size":     c.MaxMessageSize.String(),
		"max_request_size":     c.MaxRequestSize.String(),
		"max_header_bytes":     c.MaxHeaderBytes.String(),
		"max_waiters":          strconv.Itoa(c.MaxWaiters),
		"requests_per_second":  strconv.FormatFloat(c.RequestsPerSecond, 'g', -1, 64),
		"messages_per_second":  strconv.FormatFloat(c.MessagesPerSecond, 'g', -1, 64),
		"max_long_polls":       strconv.Itoa(c.MaxLongPolls),
		"max_topics":           strconv.Itoa(c.MaxTopics),
		"max_queues":           strconv.Itoa(c.MaxQueues),
		"max_queues_per_topic": strconv.Itoa(c.MaxQueuesPerTopic),
		"max_groups":           strconv.Itoa(c.MaxGroups),
		"max_push_endpoints":   strconv.Itoa(c.MaxPushEndpoints),
		"max_pending_timers":   strconv.Itoa(c.MaxPendingTimers),

		"max_transactions_per_producer_group": strconv.Itoa(c.MaxTransactionsPerProducerGroup),
		"max_pending_transactions":            strconv.Itoa(c.MaxPendingTransactions),
		"max_instances_per_group":             strconv.Itoa(c.MaxInstancesPerGroup),
		"transaction_max_checks":              strconv.Itoa(c.TransactionMaxChecks),
		"transaction_check_interval":          c.TransactionCheckInterval.String(),
		"sqs_max_waiting_receives":            strconv.Itoa(c.SQSMaxWaitingReceives),

		"read_header_timeout": c.ReadHeaderTimeout.String(),
		"read_timeout":        c.ReadTimeout.String(),
		"write_timeout":       c.WriteTimeout.String(),
		"idle_timeout":        c.IdleTimeout.String(),
		"shutdown_delay":      c.ShutdownDelay.String(),
		"raft_tick":           c.RaftTick.String(),
		"shutdown_timeout":    c.ShutdownTimeout.String(),
		"log_format":          c.LogFormat,
		"log_level":           c.LogLevel,

		"metrics_max_label_values": strconv.Itoa(c.MetricsMaxLabelValues),
		"otel_service_name":        c.OTelServiceName,
		"otel_sample_ratio":        strconv.FormatFloat(c.OTelSampleRatio, 'g', -1, 64),
		"jwt_account_claim":        c.JWTAccountClaim,
		"auth_failures_per_minute": strconv.Itoa(c.AuthFailuresPerMinute),
	}
}

// withDefaults returns c with zero values replaced by DefaultConfig's, so
// a test can fill in only what it cares about. Booleans, ShutdownDelay
// and ScrubRate keep their zero value (false, 0, disabled), which is
// meaningful.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	orString := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	orSize := func(v *ByteSize, def ByteSize) {
		if *v == 0 {
			*v = def
		}
	}
	orDuration := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	orDuration(&c.RaftTick, d.RaftTick)
	orString(&c.Listen, d.Listen)
	orString(&c.DataDir, d.DataDir)
	orString(&c.Flush, d.Flush)
	orString(&c.LogFormat, d.LogFormat)
	orString(&c.LogLevel, d.LogLevel)
	orString(&c.Version, d.Version)
	orString(&c.Commit, d.Commit)
	orString(&c.JWTAccountClaim, d.JWTAccountClaim)
	orSize(&c.SegmentSize, d.SegmentSize)
	orSize(&c.MaxMessageSize, d.MaxMessageSize)
	orSize(&c.MaxRequestSize, d.MaxRequestSize)
	orSize(&c.MaxHeaderBytes, d.MaxHeaderBytes)
	orDuration(&c.ReadHeaderTimeout, d.ReadHeaderTimeout)
	orDuration(&c.ReadTimeout, d.ReadTimeout)
	orDuration(&c.WriteTimeout, d.WriteTimeout)
	orDuration(&c.IdleTimeout, d.IdleTimeout)
	orDuration(&c.ShutdownTimeout, d.ShutdownTimeout)
	orDuration(&c.Retention, d.Retention)
	orDuration(&c.RetentionInterval, d.RetentionInterval)
	orDuration(&c.DiskCheckInterval, d.DiskCheckInterval)
	orRatio := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		}
	}
	orRatio(&c.DiskMaxUsedRatio, d.DiskMaxUsedRatio)
	orRatio(&c.DiskSendCeiling, d.DiskSendCeiling)
	orRatio(&c.DiskSystemCeiling, max(d.DiskSystemCeiling, c.DiskSendCeiling))
	if c.MaxWaiters == 0 {
		c.MaxWaiters = d.MaxWaiters
	}
	if c.SQSMaxWaitingReceives == 0 {
		c.SQSMaxWaitingReceives = d.SQSMaxWaitingReceives
	}
	if c.MetricsMaxLabelValues == 0 {
		c.MetricsMaxLabelValues = d.MetricsMaxLabelValues
	}
	if c.OTelServiceName == "" {
		c.OTelServiceName = d.OTelServiceName
	}
	if c.AuthFailuresPerMinute == 0 {
		c.AuthFailuresPerMinute = d.AuthFailuresPerMinute
	}
	if c.TransactionMaxChecks == 0 {
		c.TransactionMaxChecks = d.TransactionMaxChecks
	}
	orDuration(&c.TransactionCheckInterval, d.TransactionCheckInterval)
	if len(c.DelayLevels) == 0 {
		c.DelayLevels = d.DelayLevels
	}
	return c
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	if host, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen %q: %v", c.Listen, err)
	} else if c.ACLFile == "" && !c.InsecureNoAuth && !loopbackHost(host) {
		bad("listen %q reaches beyond this host, and without --acl-file anyone who can reach it can send, read, "+
			"reconfigure and delete everything: give --acl-file (accounts and permissions, see the README's "+
			"\"Authentication\"), listen on 127.0.0.1, or accept the risk with --insecure-no-auth", c.Listen)
	}
	if c.NodeID != 0 || c.Peers != "" {
		if _, err := c.peerMap(); err != nil {
			bad("%v", err)
		}
		if c.RaftTick < time.Millisecond || c.RaftTick > 10*time.Second {
			bad("raft-tick %s: between 1ms and 10s", c.RaftTick)
		}
	}
	if n := countSet(c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile); n != 0 && n != 3 {
		bad("--peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file go together")
	} else if n == 3 && c.NodeID == 0 {
		bad("--peer-tls-* need --node-id and --peers (a single node has no peer port)")
	}
	if c.AdminListen != "" {
		if _, _, err := net.SplitHostPort(c.AdminListen); err != nil {
			bad("admin-listen %q: %v", c.AdminListen, err)
		}
	}
	if c.SQSListen != "" {
		if host, _, err := net.SplitHostPort(c.SQSListen); err != nil {
			bad("sqs-listen %q: %v", c.SQSListen, err)
		} else if c.ACLFile == "" && !c.InsecureNoAuth && !loopbackHost(host) {
			bad("sqs-listen %q reaches beyond this host without authentication: listen on 127.0.0.1, or accept the risk with --insecure-no-auth", c.SQSListen)
		}
	}
	c.validateAuth(bad)
	c.validateTLS(bad)
	for _, o := range c.CORSAllowedOrigins {
		if o = strings.TrimSpace(o); o == "*" || o == "" {
			continue
		}
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad("cors-allowed-origins %q: want an origin such as https://app.example or http://localhost:3000", o)
		}
	}
	if c.AdvertiseAddr != "" {
		if err := checkAdvertiseAddr(c.AdvertiseAddr); err != nil {
			bad("%v", err)
		}
	}
	if c.DataDir == "" {
		bad("data-dir is empty")
	}
	if c.Flush != "sync" && c.Flush != "async" {
		bad("flush %q must be sync or async", c.Flush)
	}
	if c.MaxMessageSize < 1 || c.MaxMessageSize > 1<<30 {
		bad("max-message-size %s must be between 1B and 1GiB", c.MaxMessageSize)
	}
	if c.SegmentSize <= c.MaxMessageSize+128<<10 {
		bad("segment-size %s must exceed max-message-size %s by more than 128KiB (room for properties)", c.SegmentSize, c.MaxMessageSize)
	}
	if int64(c.SegmentSize) > storage.MaxSegmentSize {
		bad("segment-size %s must be at most %s", c.SegmentSize, ByteSize(storage.MaxSegmentSize))
	}
	if c.Retention < time.Hour {
		bad("retention %s must be at least 1h", c.Retention)
	}
	if c.RetentionInterval <= 0 || c.DiskCheckInterval <= 0 {
		bad("retention-interval and disk-check-interval must be positive")
	}
	for _, r := range []struct {
		name  string
		value float64
	}{{"disk-max-used-ratio", c.DiskMaxUsedRatio}, {"disk-send-ceiling", c.DiskSendCeiling}, {"disk-system-ceiling", c.DiskSystemCeiling}} {
		if !(r.value > 0 && r.value <= 1) {
			bad("%s %v must be in (0, 1]", r.name, r.value)
		}
	}
	if c.DiskSystemCeiling < c.DiskSendCeiling {
		bad("disk-system-ceiling %v must be at least disk-send-ceiling %v", c.DiskSystemCeiling, c.DiskSendCeiling)
	}
	if c.ScrubRate < 0 {
		bad("scrub-rate %s must not be negative", c.ScrubRate)
	}
	if c.SeedOffsets && c.DatabaseURL == "" {
		bad("seed-offsets needs database-url")
	}
	if c.MaxRequestSize < c.MaxMessageSize {
		bad("max-request-size %s must be at least max-message-size %s", c.MaxRequestSize, c.MaxMessageSize)
	}
	if c.MaxHeaderBytes < 4<<10 || c.MaxHeaderBytes > 1<<20 {
		bad("max-header-bytes %s must be between 4KiB and 1MiB", c.MaxHeaderBytes)
	}
	if c.MaxWaiters < 1 {
		bad("max-waiters %d must be positive", c.MaxWaiters)
	}
	if c.SQSMaxWaitingReceives < 1 {
		bad("sqs-max-waiting-receives %d must be positive", c.SQSMaxWaitingReceives)
	}
	if min(c.MaxTopics, c.MaxQueues, c.MaxQueuesPerTopic, c.MaxGroups, c.MaxPushEndpoints, c.MaxPendingTimers) < 0 {
		bad("max-topics, max-queues, max-queues-per-topic, max-groups, max-push-endpoints and max-pending-timers must not be negative (0 = unlimited)")
	}
	if c.MaxInstancesPerGroup < 0 {
		bad("max-instances-per-group must not be negative (0 = unlimited)")
	}
	if c.MaxTransactionsPerProducerGroup < 0 || c.MaxPendingTransactions < 0 {
		bad("max-transactions-per-producer-group and max-pending-transactions must not be negative (0 = unlimited)")
	}
	if c.TransactionMaxChecks < 1 || c.TransactionMaxChecks > broker.MaxTransactionMaxChecks {
		bad("transaction-max-checks %d must be between 1 and %d", c.TransactionMaxChecks, broker.MaxTransactionMaxChecks)
	}
	if c.TransactionCheckInterval < time.Millisecond || c.TransactionCheckInterval > broker.MaxCheckAfter {
		bad("transaction-check-interval %s must be between 1ms and %s", c.TransactionCheckInterval, broker.MaxCheckAfter)
	}
	if c.RequestsPerSecond < 0 || c.MessagesPerSecond < 0 || c.MaxLongPolls < 0 {
		bad("requests-per-second, messages-per-second and max-long-polls must not be negative (0 = unlimited)")
	}
	if c.MetricsMaxLabelValues < 1 {
		bad("metrics-max-label-values %d must be positive", c.MetricsMaxLabelValues)
	}
	if len(c.DelayLevels) == 0 || len(c.DelayLevels) > maxDelayLevels {
		bad("delay-levels must list 1-%d delays", maxDelayLevels)
	}
	for i, d := range c.DelayLevels {
		if d <= 0 {
			bad("delay level %d is %s; it must be positive", i+1, d)
		}
	}
	if c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.ShutdownTimeout <= 0 {
		bad("read-header-timeout, read-timeout, write-timeout and shutdown-timeout must be positive")
	}
	if c.ReadTimeout < c.ReadHeaderTimeout {
		bad("read-timeout %s must be at least read-header-timeout %s", c.ReadTimeout, c.ReadHeaderTimeout)
	}
	if c.IdleTimeout < 0 || c.ShutdownDelay < 0 {
		bad("idle-timeout and shutdown-delay must not be negative")
	}
	switch c.LogFormat {
	case "auto", "console", "json":
	default:
		bad("log-format %q must be auto, console or json", c.LogFormat)
	}
	switch c.LogLevel {
	case "trace", "debug", "info", "warn", "error":
	default:
		bad("log-level %q must be trace, debug, info, warn or error", c.LogLevel)
	}
	if c.DatabaseURL != "" {
		if u, err := url.Parse(c.DatabaseURL); err != nil || u.Scheme == "" {
			bad("database-url is not a URL")
		}
	}
	if c.OTLPEndpoint != "" {
		if u, err := url.Parse(c.OTLPEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("otlp-endpoint %q must be an http:// or https:// URL", c.OTLPEndpoint)
		}
	}
	if c.OTelSampleRatio < 0 || c.OTelSampleRatio > 1 {
		bad("otel-sample-ratio %v must be between 0 and 1", c.OTelSampleRatio)
	}
	return errors.Join(errs...)
}

// scrubRate is the storage option for a --scrub-rate: 0 disables the
// scrubber (storage.Options reads 0 as its default, negative as off).
func scrubRate(rate ByteSize) int64 {
	if rate == 0 {
		return -1
	}
	return int64(rate)
}

// validateAuth checks the authentication flags.
func (c Config) validateAuth(bad func(format string, args ...any)) {
	jwt := c.JWTSecret != "" || c.JWTJWKSURL != ""
	if c.ACLFile == "" && (jwt || c.JWTIssuer != "" || c.JWTAudience != "") {
		bad("the jwt flags need --acl-file: a token's %s claim names an account of it", c.JWTAccountClaim)
	}
	switch {
	case c.JWTSecret != "" && c.JWTJWKSURL != "":
		bad("give --jwt-secret or --jwt-jwks-url, not both")
	case c.JWTSecret != "" && len(c.JWTSecret) < 32:
		bad("jwt-secret is %d bytes; an HMAC key must be at least 32 (e.g. openssl rand -base64 32)", len(c.JWTSecret))
	case c.JWTJWKSURL != "":
		if err := auth.CheckJWKSURL(c.JWTJWKSURL); err != nil {
			bad("%v", err)
		}
		if c.JWTIssuer == "" || c.JWTAudience == "" {
			bad("jwt-jwks-url needs --jwt-issuer and --jwt-audience: an identity provider signs tokens for other services too")
		}
	}
	if c.JWTAccountClaim == "" {
		bad("jwt-account-claim is empty")
	}
	if c.AuthFailuresPerMinute < 1 {
		bad("auth-failures-per-minute %d must be positive", c.AuthFailuresPerMinute)
	}
}

// validateTLS checks the TLS flags.
func (c Config) validateTLS(bad func(format string, args ...any)) {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		bad("give --tls-cert-file and --tls-key-file together")
	}
	if c.TLSClientCAFile != "" {
		if c.TLSCertFile == "" {
			bad("tls-client-ca-file needs --tls-cert-file and --tls-key-file")
		}
		if c.ACLFile == "" {
			bad("tls-client-ca-file needs --acl-file: a client certificate's subject CN names an account of it")
		}
	}
}

// loopbackHost reports whether a listen host reaches only this host:
// localhost or a loopback address (an empty host is every interface).
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// redactedDatabaseURL is DatabaseURL with any password masked, for logs.
func (c Config) redactedDatabaseURL() string {
	if c.DatabaseURL == "" {
		return ""
	}
	u, err := url.Parse(c.DatabaseURL)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// ByteSize is a size in bytes that parses and prints with units: a plain
// number of bytes, or a number followed by KiB/MiB/GiB/TiB (also K/M/G/T,
// powers of 1024) or KB/MB/GB/TB (powers of 1000).
type ByteSize int64

// byteUnits are the accepted suffixes, longest first for parsing.
var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// UnmarshalText parses "4MiB", "1GiB", "512KiB", "1048576", "1GB".
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	factor := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, factor = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || (factor > 1 && n > (1<<62)/factor) {
		return fmt.Errorf("size %q: want a number of bytes or a number with KiB, MiB, GiB, TiB, KB, MB, GB or TB", string(text))
	}
	*b = ByteSize(n * factor)
	return nil
}

// String prints the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		suffix string
		factor int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.factor == 0 {
			return strconv.FormatInt(int64(b)/u.factor, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// maxDelayLevels bounds the number of delay levels.
const maxDelayLevels = 64

// DelayLevels is the delay of each delay level, level 1 first. It parses
// from a space- or comma-separated list of Go durations ("1s 5s 10s", "500ms").
type DelayLevels []time.Duration

// UnmarshalText parses a space- or comma-separated list of delays in
// RocketMQ's notation (ms, s, m, h, d units; see schedule.ParseLevels).
func (d *DelayLevels) UnmarshalText(text []byte) error {
	levels, err := schedule.ParseLevels(strings.ReplaceAll(string(text), ",", " "))
	if err != nil {
		return err
	}
	*d = levels
	return nil
}

// String prints the levels in the form UnmarshalText reads ("1s 5s 1m 2h").
func (d DelayLevels) String() string { return schedule.FormatLevels(d) }

// CIDRList is a list of address ranges. It parses from a comma- or
// space-separated list of CIDR prefixes ("10.0.0.0/8, fd00::/8"); a bare
// address is its own /32 or /128.
type CIDRList []netip.Prefix

// UnmarshalText parses the list.
func (l *CIDRList) UnmarshalText(text []byte) error {
	var out CIDRList
	for _, f := range strings.FieldsFunc(string(text), func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return fmt.Errorf("CIDR %q: want a prefix such as 10.0.0.0/8 or an address", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	*l = out
	return nil
}

// String prints the list in the form UnmarshalText reads.
func (l CIDRList) String() string {
	parts := make([]string, len(l))
	for i, p := range l {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

// DefaultLease is the lease of a pulled message when neither the pull nor
// its group says (for help texts: cmd/mqgate imports neither api nor the
// broker); MaxLease is the longest a pull or a lease change may ask for.
const (
	DefaultLease = broker.DefaultLease
	MaxLease     = time.Duration(api.MaxInvisibleMs) * time.Millisecond
)

// countSet counts the non-empty strings.
func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// peerMap parses Peers: every replica's id and peer address, NodeID's
// among them.
func (c Config) peerMap() (map[uint64]string, error) {
	if c.NodeID == 0 {
		return nil, errors.New("--peers needs --node-id")
	}
	peers := map[uint64]string{}
	for _, f := range strings.Split(c.Peers, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		idText, addr, ok := strings.Cut(f, "=")
		id, err := strconv.ParseUint(idText, 10, 64)
		if !ok || err != nil || id == 0 {
			return nil, fmt.Errorf("peers: %q is not id=host:port with an id above 0", f)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peers: %q: %v", f, err)
		}
		if _, dup := peers[id]; dup {
			return nil, fmt.Errorf("peers: id %d twice", id)
		}
		peers[id] = addr
	}
	if _, ok := peers[c.NodeID]; !ok {
		return nil, fmt.Errorf("peers: node id %d is not among them (%q)", c.NodeID, c.Peers)
	}
	return peers, nil
}
