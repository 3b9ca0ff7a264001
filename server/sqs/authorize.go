package sqs

import (
	"net/http"
	"reflect"

	"github.com/mqgate/mqgate/server/auth"
)

// What each operation needs of the signing account (README "SQS API"),
// on the queue's topic and group (both named sqs_<name> or
// sqsfifo_<base>): admin accounts may do everything.
const (
	// needAdmin: creating, deleting, reconfiguring, purging, tagging.
	needAdmin = iota
	// needPub: PUB on the topic (sending).
	needPub
	// needSub: SUB on the topic and the group (receiving, deleting,
	// changing visibility).
	needSub
	// needAny: PUB or SUB on the topic (reading the queue's URL,
	// attributes, tags and dead-letter sources).
	needAny
	// needNothing: any signed account (ListQueues lists every queue).
	needNothing
)

var operationNeeds = map[string]int{
	"CreateQueue": needAdmin, "DeleteQueue": needAdmin, "SetQueueAttributes": needAdmin, "PurgeQueue": needAdmin,
	"TagQueue": needAdmin, "UntagQueue": needAdmin,
	"SendMessage": needPub, "SendMessageBatch": needPub,
	"ReceiveMessage": needSub, "DeleteMessage": needSub, "DeleteMessageBatch": needSub,
	"ChangeMessageVisibility": needSub, "ChangeMessageVisibilityBatch": needSub,
	"GetQueueUrl": needAny, "GetQueueAttributes": needAny, "ListQueueTags": needAny, "ListDeadLetterSourceQueues": needAny,
	"ListQueues": needNothing,
	// Moving messages is an operator's act (SourceArn and DestinationArn
	// name queues, not one QueueUrl).
	"StartMessageMoveTask": needAdmin, "ListMessageMoveTasks": needAdmin, "CancelMessageMoveTask": needAdmin,
}

// authorize checks that req's account may run its operation on the queue
// in names (nothing to check with authentication off).
func authorize(req *request, in any) error {
	a := req.account
	if a == nil || a.Admin {
		return nil
	}
	need, ok := operationNeeds[req.op]
	if !ok {
		need = needAdmin
	}
	if need == needNothing {
		return nil
	}
	if need == needAdmin {
		return denied(req.op)
	}
	v := reflect.ValueOf(in).Elem()
	var q queueName
	if f := v.FieldByName("QueueUrl"); f.IsValid() {
		name, err := queueFromURL(f.String())
		if err != nil {
			return err
		}
		q = name
	} else if f := v.FieldByName("QueueName"); f.IsValid() {
		name, err := parseQueueName(f.String())
		if err != nil {
			return errQueueDoesNotExist(queueName(truncate(f.String(), 100)))
		}
		q = name
	}
	t := q.topic()
	switch need {
	case needPub:
		if a.Can(auth.Topic, t, auth.PermPub) {
			return nil
		}
	case needSub:
		if a.Can(auth.Topic, t, auth.PermSub) && a.Can(auth.Group, t, auth.PermSub) {
			return nil
		}
	case needAny:
		if a.Can(auth.Topic, t, auth.PermPub) || a.Can(auth.Topic, t, auth.PermSub) {
			return nil
		}
	}
	return denied(req.op)
}

func denied(op string) *apiError {
	return errAuth("AccessDenied", http.StatusForbidden, "Access to the resource is denied: the account may not %s on this queue.", op)
}
