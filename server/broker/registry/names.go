package registry

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mqgate/mqgate/server/broker/quote"
)

// Naming rules (RocketMQ TopicValidator): topics up to MaxTopicLen and
// groups up to MaxGroupLen characters of [a-zA-Z0-9_-]; the "%" and
// SystemPrefix prefixes and SCHEDULE_TOPIC_XXXX are reserved for system
// topics.
const (
	MaxTopicLen = 127
	MaxGroupLen = 120
	// SystemPrefix starts the name of every system topic (rmq_sys_META
	// among them).
	SystemPrefix = "rmq_sys_"
)

// The sentinels of the name rules; server/broker's ErrInvalidName and
// ErrReservedName are them.
var (
	// ErrInvalidName: a topic or group name breaks the naming rules.
	ErrInvalidName = errors.New("invalid name")
	// ErrReservedName: the name is reserved for system topics/groups.
	ErrReservedName = errors.New("reserved name")
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

// ValidateName checks a client-supplied name of a kind ("topic",
// "group", "producer group") against the naming rules, up to max
// characters.
func ValidateName(kind, name string, max int) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s name is empty", ErrInvalidName, kind)
	case len(name) > max:
		return fmt.Errorf("%w: %s name is %d characters long; the limit is %d", ErrInvalidName, kind, len(name), max)
	case strings.HasPrefix(name, "%") || strings.HasPrefix(name, SystemPrefix) || name == "SCHEDULE_TOPIC_XXXX":
		return fmt.Errorf("%w: %s name %s uses a reserved prefix (%%, %s) or name", ErrReservedName, kind, quote.Value(name), SystemPrefix)
	case !isNameChars(name):
		return fmt.Errorf("%w: %s name %s may only contain letters, digits, '_' and '-'", ErrInvalidName, kind, quote.Value(name))
	}
	return nil
}

// ValidateTopicName checks a client-supplied topic name.
func ValidateTopicName(name string) error { return ValidateName("topic", name, MaxTopicLen) }

// ValidateGroupName checks a client-supplied group name.
func ValidateGroupName(name string) error { return ValidateName("group", name, MaxGroupLen) }
