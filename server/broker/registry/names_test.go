package registry

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
		sent error
	}{
		{ValidateTopicName("orders-1_A"), "", nil},
		{ValidateTopicName(strings.Repeat("t", MaxTopicLen)), "", nil},
		{ValidateGroupName(strings.Repeat("g", MaxGroupLen)), "", nil},
		{ValidateTopicName(""), "invalid name: topic name is empty", ErrInvalidName},
		{ValidateTopicName(strings.Repeat("t", MaxTopicLen+1)), "invalid name: topic name is 128 characters long; the limit is 127", ErrInvalidName},
		{ValidateGroupName(strings.Repeat("g", MaxGroupLen+1)), "invalid name: group name is 121 characters long; the limit is 120", ErrInvalidName},
		{ValidateTopicName("%RETRY%g"), `reserved name: topic name "%RETRY%g" uses a reserved prefix (%, rmq_sys_) or name`, ErrReservedName},
		{ValidateTopicName(Topic), `reserved name: topic name "rmq_sys_META" uses a reserved prefix (%, rmq_sys_) or name`, ErrReservedName},
		{ValidateGroupName("SCHEDULE_TOPIC_XXXX"), `reserved name: group name "SCHEDULE_TOPIC_XXXX" uses a reserved prefix (%, rmq_sys_) or name`, ErrReservedName},
		{ValidateName("producer group", "a.b", MaxGroupLen), `invalid name: producer group name "a.b" may only contain letters, digits, '_' and '-'`, ErrInvalidName},
	} {
		if c.want == "" {
			if c.err != nil {
				t.Errorf("refused: %v", c.err)
			}
			continue
		}
		if c.err == nil || c.err.Error() != c.want || !errors.Is(c.err, c.sent) {
			t.Errorf("got %v, want %s (%v)", c.err, c.want, c.sent)
		}
	}
}
