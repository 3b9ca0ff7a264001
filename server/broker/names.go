package broker

import (
	"github.com/mqgate/mqgate/server/broker/dlq"
	"github.com/mqgate/mqgate/server/broker/registry"
)

// The naming rules are the registry family's (package registry's
// names.go); the prefixes of the broker's own topics are here.
const (
	retryPrefix  = "%RETRY%"
	dlqPrefix    = dlq.TopicPrefix
	systemPrefix = registry.SystemPrefix

	// offsetTopic carries ack and offset-commit records (package offset).
	offsetTopic = systemPrefix + "OFFSET"
)

// ValidateTopicName checks a client-supplied topic name (package
// registry's rules).
func ValidateTopicName(name string) error { return registry.ValidateTopicName(name) }

// ValidateGroupName checks a client-supplied group name (package
// registry's rules).
func ValidateGroupName(name string) error { return registry.ValidateGroupName(name) }

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
