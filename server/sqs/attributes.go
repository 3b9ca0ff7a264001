package sqs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Queue attribute names.
const (
	attrVisibilityTimeout     = "VisibilityTimeout"
	attrDelaySeconds          = "DelaySeconds"
	attrRetention             = "MessageRetentionPeriod"
	attrWaitTime              = "ReceiveMessageWaitTimeSeconds"
	attrMaxMessageSize        = "MaximumMessageSize"
	attrRedrivePolicy         = "RedrivePolicy"
	attrRedriveAllowPolicy    = "RedriveAllowPolicy"
	attrFifoQueue             = "FifoQueue"
	attrContentBasedDedup     = "ContentBasedDeduplication"
	attrDeduplicationScope    = "DeduplicationScope"
	attrFifoThroughputLimit   = "FifoThroughputLimit"
	attrPolicy                = "Policy"
	attrKmsMasterKeyID        = "KmsMasterKeyId"
	attrKmsDataKeyReuse       = "KmsDataKeyReusePeriodSeconds"
	attrSqsManagedSse         = "SqsManagedSseEnabled"
	attrQueueArn              = "QueueArn"
	attrApproxMessages        = "ApproximateNumberOfMessages"
	attrApproxNotVisible      = "ApproximateNumberOfMessagesNotVisible"
	attrApproxDelayed         = "ApproximateNumberOfMessagesDelayed"
	attrCreatedTimestamp      = "CreatedTimestamp"
	attrLastModifiedTimestamp = "LastModifiedTimestamp"
)

// defaultMaxMessageSize is SQS's default MaximumMessageSize (256 KiB).
const defaultMaxMessageSize = 256 << 10

// attrRule checks and canonicalises one settable attribute's value.
type attrRule struct {
	// fifoOnly attributes are refused on standard queues.
	fifoOnly bool
	// createOnly attributes cannot be changed by SetQueueAttributes.
	createOnly bool
	check      func(h *Handler, v string) (string, error)
}

func intRange(lo, hi int) func(*Handler, string) (string, error) {
	return func(_ *Handler, v string) (string, error) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return "", fmt.Errorf("must be an integer between %d and %d", lo, hi)
		}
		return strconv.Itoa(n), nil
	}
}

func boolValue(_ *Handler, v string) (string, error) {
	switch strings.ToLower(v) {
	case "true":
		return "true", nil
	case "false":
		return "false", nil
	}
	return "", fmt.Errorf("must be true or false")
}

// Bounds of the free-text attributes, which the queue table keeps (and
// rewrites whole at every change): a queue policy is a JSON object of at
// most maxPolicyBytes (AWS refuses larger policies too), a KMS key id at
// most maxKmsKeyIDBytes (AWS's KeyId limit).
const (
	maxPolicyBytes   = 20 << 10
	maxKmsKeyIDBytes = 2048
)

func policyValue(_ *Handler, v string) (string, error) {
	if v == "" {
		return v, nil
	}
	if len(v) > maxPolicyBytes {
		return "", fmt.Errorf("a policy is at most %d bytes, this one is %d", maxPolicyBytes, len(v))
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(v), &obj); err != nil {
		return "", fmt.Errorf("a policy must be a JSON object")
	}
	return v, nil
}

func kmsKeyValue(_ *Handler, v string) (string, error) {
	if len(v) > maxKmsKeyIDBytes {
		return "", fmt.Errorf("a KMS key id is at most %d bytes", maxKmsKeyIDBytes)
	}
	return v, nil
}

func oneOf(vals ...string) func(*Handler, string) (string, error) {
	return func(_ *Handler, v string) (string, error) {
		for _, ok := range vals {
			if v == ok {
				return v, nil
			}
		}
		return "", fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

// settable are the attributes CreateQueue and SetQueueAttributes take.
var settable = map[string]attrRule{
	attrVisibilityTimeout: {check: intRange(0, 43200)},
	attrDelaySeconds:      {check: intRange(0, 900)},
	attrRetention:         {check: intRange(60, 1209600)},
	attrWaitTime:          {check: intRange(0, 20)},
	attrMaxMessageSize: {check: func(h *Handler, v string) (string, error) {
		return intRange(1024, min(1<<20, h.opts.MaxMessageSize))(h, v)
	}},
	attrFifoQueue:           {check: boolValue, createOnly: true},
	attrContentBasedDedup:   {check: boolValue, fifoOnly: true},
	attrDeduplicationScope:  {check: oneOf("messageGroup", "queue"), fifoOnly: true},
	attrFifoThroughputLimit: {check: oneOf("perQueue", "perMessageGroupId"), fifoOnly: true},
	attrPolicy:              {check: policyValue},
	attrKmsMasterKeyID:      {check: kmsKeyValue},
	attrKmsDataKeyReuse:     {check: intRange(60, 86400)},
	attrSqsManagedSse:       {check: boolValue},
	attrRedrivePolicy: {check: func(_ *Handler, v string) (string, error) {
		_, canon, err := parseRedrivePolicy(v)
		return canon, err
	}},
	attrRedriveAllowPolicy: {check: func(_ *Handler, v string) (string, error) {
		_, canon, err := parseRedriveAllowPolicy(v)
		return canon, err
	}},
}

// readOnly are the attributes only GetQueueAttributes reports.
var readOnly = []string{attrQueueArn, attrApproxMessages, attrApproxNotVisible, attrApproxDelayed, attrCreatedTimestamp, attrLastModifiedTimestamp}

// defaults are the values of the settable attributes a queue was not
// given.
func (h *Handler) defaults(q queueName) map[string]string {
	d := map[string]string{
		attrVisibilityTimeout: "30",
		attrDelaySeconds:      "0",
		attrRetention:         "345600",
		attrWaitTime:          "0",
		attrMaxMessageSize:    strconv.Itoa(min(defaultMaxMessageSize, h.opts.MaxMessageSize)),
		attrSqsManagedSse:     "false",
	}
	if q.fifo() {
		d[attrFifoQueue] = "true"
		d[attrContentBasedDedup] = "false"
		d[attrDeduplicationScope] = "queue"
		d[attrFifoThroughputLimit] = "perQueue"
	}
	return d
}

// checkAttributes checks attrs for queue q and returns them canonical.
func (h *Handler) checkAttributes(q queueName, attrs map[string]string, creating bool) (map[string]string, error) {
	out := make(map[string]string, len(attrs))
	for name, v := range attrs {
		rule, ok := settable[name]
		if !ok {
			return nil, errInvalidAttributeName(name)
		}
		if rule.fifoOnly && !q.fifo() {
			return nil, errInvalidAttributeName(name)
		}
		if rule.createOnly && !creating {
			return nil, errInvalidAttributeName(name)
		}
		cv, err := rule.check(h, v)
		if err != nil {
			return nil, errInvalidAttributeValue(name, err.Error())
		}
		out[name] = cv
	}
	if f, ok := out[attrFifoQueue]; ok {
		if (f == "true") != q.fifo() {
			return nil, errInvalidParameter("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix, and FifoQueue must be true; a standard queue's name must not end with .fifo.")
		}
	}
	return out, nil
}

// attrInt is the integer value of attribute name of m.
func attrInt(m map[string]string, name string) int {
	n, _ := strconv.Atoi(m[name])
	return n
}
