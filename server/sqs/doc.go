// Package sqs is mqgate's SQS-compatible endpoint (--sqs-listen): the
// AWS SDKs and the AWS CLI work against mqgate unchanged. It is an adapter
// on the broker's facade (package server/broker) and never imports the
// REST API or the storage engine (ARCHITECTURE.md, "The broker as a state
// machine"; internal/archtest checks it).
//
// # Protocols
//
// A POST carrying X-Amz-Target: AmazonSQS.<Operation> is the AWS JSON 1.0
// protocol (application/x-amz-json-1.0, what current SDKs speak): the
// body is the operation's input as a JSON object, the answer its output;
// errors are {"__type": "com.amazonaws.sqs#<Shape>", "message": …} with
// the query protocol's code in the x-amzn-query-error header, which the
// SDKs report as the error code (AWS.SimpleQueueService.NonExistentQueue
// for QueueDoesNotExist). Any other request is the query protocol
// (Action=<Operation> form posts), whose errors are the XML ErrorResponse.
// Malformed input is a 4xx in the protocol's shape, never a 5xx.
//
// # The mapping onto the engine
//
// A queue is a topic plus a clustering group of the same name (names.go):
// "sqs_<name>" for a standard queue, "sqsfifo_<base>" for "<base>.fifo".
// Sends go through Broker.Send, receives are Broker.Pull with the
// visibility timeout as the lease (0 is the shortest lease: visible again
// at once), DeleteMessage is Broker.Ack and ChangeMessageVisibility
// Broker.ChangeLease. A lease that runs out is a failed delivery: the
// group's fixed retry policy of 1 ms makes the message visible again at
// once, as a retry copy whose reconsume count is ApproximateReceiveCount
// − 1 and whose origin id is the MessageId. DelaySeconds is the send's
// delay (the timer path). PurgeQueue moves the group's offsets past
// everything stored (Broker.ResetOffset). Receipt handles wrap the
// broker's receipts ("mq1" + base64url), opaque to clients.
//
// Message move tasks receive from a dead-letter queue and send back
// (movetasks.go). RedrivePolicy maxReceiveCount is the group's retry limit, and the
// endpoint's redrive mover copies the group's new dead letters to the SQS
// dead-letter queue (redrive.go). A FIFO queue's group is orderly, with
// MessageGroupId as the sharding key and the deduplication id as the
// broker's dedup id.
//
// Attributes that have no place in the topic's or the group's
// configuration, tags, the redrive mover's positions and the message move
// tasks are a table the endpoint keeps on its own topics (meta.go): each
// change appends the whole table, and the newest is the table in force.
// The table moves between two topics, "sqs-meta" and "sqs-meta-b", at
// least hourly, deleting the one it leaves: their long retention would
// otherwise keep every CommitLog segment from the table's first message
// on.
//
// With an ACL (Options.ACL), every request must be signed with AWS SigV4
// — an Authorization header or a presigned URL — by an account of the ACL
// file (sigv4.go), which must hold the permission its operation needs
// (authorize.go). Failed signatures count in the server's auth failure
// limiter (Options.Failures), which answers a guesser RequestThrottled.
//
// At most Options.MaxWaitingReceives receives wait at once: one more gets
// what is there at once, or RequestThrottled (messages.go).
//
// How message attributes, AWSTraceHeader, MessageGroupId and
// MessageDeduplicationId are stored: messages.go; the README's "SQS API"
// lists the operations, the attributes and what differs from AWS.
package sqs
