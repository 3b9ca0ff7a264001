package broker

import (
	"fmt"
	"strings"

	"github.com/mqgate/mqgate/server/broker/dlq"
)

// Naming rules (RocketMQ TopicValidator): topics up to 127 and
// groups up to 120 characters of [a-zA-Z0-9_-]; the "%" and "rmq_sys_"
// prefixes and SCHEDULE_TOPIC_XXXX are reserved for system topics.
const (
	maxTopicLen = 127
	maxGroupLen = 120

	retryPrefix  = "%RETRY%"
	dlqPrefix    = dlq.TopicPrefix
	systemPrefix = "rmq_sys_"

	// offsetTopic carries ack and offset-commit records (package offset).
	offsetTopic = systemPrefix + "OFFSET"
)

// isNameChars reports whether name is only letters, digits, '_' and '-'
// (a loop, not a regexp: every send checks its topic).
func isNameChars(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validateName(kind, name string, max int) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalidName, kind)
	case len(name) > max:
		return fmt.Errorf("%w: %s name is %d characters long; the limit is %d", ErrInvalidName, kind, len(name), max)
	case strings.HasPrefix(name, "%") || strings.HasPrefix(name, systemPrefix) || name == "SCHEDULE_TOPIC_XXXX":
		return fmt.Errorf("%w: %s name %s uses a reserved prefix (%%, %s) or name", ErrReservedName, kind, QuoteValue(name), systemPrefix)
	case !isNameChars(name):
		return fmt.Errorf("%w: %s name %s may only contain letters, digits, '_' and '-'", ErrInvalidName, kind, QuoteValue(name))
	}
	return nil
}

// ValidateTopicName checks a client-supplied topic name.
func ValidateTopicName(name string) error { return validateName("topic", name, maxTopicLen) }

// ValidateGroupName checks a client-supplied group name.
func ValidateGroupName(name string) error { return validateName("group", name, maxGroupLen) }

// RetryTopic is the retry topic of a group.
func RetryTopic(group string) string { return retryPrefix + group }

// DLQTopic is the dead-letter topic of a group.
func DLQTopic(group string) string { return dlq.Topic(group) }

// bookkeeping reports whether topic holds the broker's own records
// (progress, registry, dead-letter and timer statuses, leases): never shown as
// messages (a registry record holds push secrets).
func bookkeeping(topic string) bool {
	switch topic {
	case offsetTopic, metaTopic, dlqStatusTopic, timerStatusTopic, txnOpTopic, leaseTopic, traceTopic, cutTopic:
		return true
	}
	return false
}
