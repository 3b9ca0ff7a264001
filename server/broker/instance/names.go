package instance

import (
	"fmt"
	"strings"
	"time"

	"github.com/mqgate/mqgate/storage/offset"
)

// Sep joins a broadcasting group's name and a client id into the progress
// group of the instance: "<group>@<client id>" (package offset's
// InstanceSep; group names never hold one, so the first one splits).
const Sep = offset.InstanceSep

// Key is the progress group of client's instance of group.
func Key(group, client string) string { return group + Sep + client }

// Split splits a progress group into the group and the client id of an
// instance: the client id is "" for a group's own keys (a name without
// Sep, or one ending in it).
func Split(name string) (group, client string) {
	if i := strings.Index(name, Sep); i >= 0 {
		return name[:i], name[i+len(Sep):]
	}
	return name, ""
}

// Base is the group a progress group belongs to.
func Base(name string) string {
	g, _ := Split(name)
	return g
}

// Prop names, on a broadcasting group's dead letter (and its resend), the
// client id of the instance it belongs to.
const Prop = "BROADCAST_INSTANCE"

// Bounds of a group's InstanceIdle: how long an instance may stay idle
// before it is forgotten.
const (
	// DefaultIdle is the idle time of a group that does not say.
	DefaultIdle = 24 * time.Hour
	// MinIdle and MaxIdle bound a group's InstanceIdle.
	MinIdle = time.Second
	MaxIdle = 366 * 24 * time.Hour
)

// Idle is the idle time of a group whose InstanceIdle is configured (0:
// DefaultIdle).
func Idle(configured time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return DefaultIdle
}

// CheckIdle validates a group's InstanceIdle (0: the default); the broker
// reports the error as an invalid argument.
func CheckIdle(d time.Duration) error {
	if d != 0 && (d < MinIdle || d > MaxIdle) {
		return fmt.Errorf("instanceIdle must be %v..%v", MinIdle, MaxIdle)
	}
	return nil
}

// Generation is the generation of a registering instance's start offsets
// at a key whose highest generation was had: the time in seconds, above
// had, so that what an earlier instance under the same client id left
// behind (a lease record, a late ack) does not apply to this one.
func Generation(now time.Time, had uint32) uint32 {
	return max(uint32(now.Unix()), had+1)
}
