package receipt

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	secretA = "0123456789abcdef0123456789abcdef"
	secretB = "fedcba9876543210" // the shortest secret a key may have
)

// golden are receipt texts written by the broker before this package
// existed (and the Key JSON of its records): they must verify, and
// re-encode, byte for byte, forever.
var golden = []struct {
	name    string
	id      uint16
	secret  string
	version byte
	r       Receipt
	text    string
}{
	{"v1", 5, secretA, VersionHMAC, Receipt{Group: "orders-group", Topic: "%RETRY%orders-group", QueueID: 3, Offset: 123456789, Epoch: 1<<62 + 77},
		"AUAAAAAAAABNAAAAAwAAAAAHW80VDG9yZGVycy1ncm91cBMlUkVUUlklb3JkZXJzLWdyb3VwPpMtSDYxhFdNuDsyAxq-Ww"},
	{"v2", 5, secretA, VersionCMAC, Receipt{Group: "orders-group", Topic: "%RETRY%orders-group", QueueID: 3, Offset: 123456789, Epoch: 1<<62 + 77},
		"AkAAAAAAAABNAAAAAwAAAAAHW80VDG9yZGVycy1ncm91cBMlUkVUUlklb3JkZXJzLWdyb3VwXokn0SdaDsm97tyoZQKBsw"},
	{"v3", 5, secretA, VersionKeyed, Receipt{Group: "orders-group", Topic: "%RETRY%orders-group", QueueID: 3, Offset: 123456789, Epoch: 1<<62 + 77},
		"AwAFQAAAAAAAAE0AAAADAAAAAAdbzRUMb3JkZXJzLWdyb3VwEyVSRVRSWSVvcmRlcnMtZ3JvdXBCUs0wtdbLf-5Vb8OcwO1M"},
	{"v3 key 1", 1, secretB, VersionKeyed, Receipt{Topic: "t", QueueID: -1, Epoch: 1},
		"AwABAAAAAAAAAAH_____AAAAAAAAAAAAAXQzaqM_ysNNRQTgoEekiws3"},
}

// TestGoldenReceipts: the layout and the MACs of every version are those
// of the receipts already handed out.
func TestGoldenReceipts(t *testing.T) {
	for _, g := range golden {
		c, err := NewCodec(g.id, []byte(g.secret))
		require.NoError(t, err)
		require.Equal(t, g.text, c.EncodeVersion(g.r, g.version), g.name)
		r, v, err := c.DecodeVersion(g.text)
		require.NoError(t, err, g.name)
		require.Equal(t, g.r, r, g.name)
		require.Equal(t, g.version, v, g.name)
	}
	// A ring holding key 1 and key 5 under the same secret checks all
	// three versions: 1 and 2 under key 1, 3 under the key it names.
	ring := mustRing(t, Key{ID: 1, Secret: []byte(secretA)}, Key{ID: 5, Secret: []byte(secretA)})
	for _, g := range golden[:3] {
		r, err := ring.Decode(g.text)
		require.NoError(t, err, g.name)
		require.Equal(t, g.r, r, g.name)
	}
}

// TestKeyJSON: a key record's "key" member and the snapshot's keys are
// this JSON (part of the on-disk format).
func TestKeyJSON(t *testing.T) {
	k := Key{ID: 7, Secret: []byte(secretA), CreatedMs: 1700000000123}
	b, err := json.Marshal(k)
	require.NoError(t, err)
	require.JSONEq(t, `{"id":7,"secret":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=","createdMs":1700000000123}`, string(b))
	require.Equal(t, `{"id":7,"secret":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=","createdMs":1700000000123}`, string(b), "member order too")
	var back Key
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, k, back)
}

func mustRing(t *testing.T, keys ...Key) *Ring {
	t.Helper()
	var ring *Ring
	for _, k := range keys {
		next, err := ring.WithKey(k)
		require.NoError(t, err)
		ring = next
	}
	return ring
}

func keyIDs(ring *Ring) []uint16 {
	var ids []uint16
	for _, k := range ring.Keys() {
		ids = append(ids, k.ID)
	}
	return ids
}

// TestRingRotation: the newest key signs, the MaxKeys newest verify, and a
// receipt of a key rotated out no longer does; applying a key leaves the
// ring it was applied to as it was.
func TestRingRotation(t *testing.T) {
	var empty *Ring
	require.Equal(t, LegacyKeyID, empty.NextID())
	require.Nil(t, empty.Keys())

	secret := func(id uint16) []byte { return []byte(secretA[:31] + string(rune('a'+id))) }
	ring := mustRing(t, Key{ID: LegacyKeyID, Secret: secret(LegacyKeyID)})
	r := Receipt{Group: "g", Topic: "t", QueueID: 2, Offset: 10, Epoch: 3}
	first := ring.Encode(r)
	signed := []string{first}
	for len(signed) < MaxKeys+1 {
		before := ring
		id := ring.NextID()
		next, err := ring.WithKey(Key{ID: id, Secret: secret(id), CreatedMs: int64(id)})
		require.NoError(t, err)
		require.Len(t, before.Keys(), min(len(signed), MaxKeys), "the ring applied to is unchanged")
		ring = next
		signed = append(signed, ring.Encode(r))
	}
	require.Equal(t, []uint16{2, 3, 4, 5, 6, 7, 8, 9}, keyIDs(ring))
	require.Equal(t, uint16(10), ring.NextID())
	_, err := ring.Decode(first)
	require.Error(t, err, "a receipt of a key rotated out")
	for i, s := range signed[1:] {
		got, err := ring.Decode(s)
		require.NoError(t, err, "receipt of key %d", i+2)
		require.Equal(t, r, got)
	}
	// The newest key signs.
	newest, err := NewCodec(9, secret(9))
	require.NoError(t, err)
	_, v, err := newest.DecodeVersion(ring.Encode(r))
	require.NoError(t, err)
	require.Equal(t, byte(VersionKeyed), v)

	// A key applied again (a record replayed over a newer snapshot)
	// replaces itself: the ring is the same.
	again, err := ring.WithKey(ring.Keys()[3])
	require.NoError(t, err)
	require.Equal(t, ring.Keys(), again.Keys())

	// An older key applied after newer ones sorts in by id and does not
	// sign; below the MaxKeys newest it is dropped at once.
	late, err := mustRing(t, Key{ID: 3, Secret: secret(3)}).WithKey(Key{ID: 2, Secret: secret(2)})
	require.NoError(t, err)
	require.Equal(t, []uint16{2, 3}, keyIDs(late))
	signer, err := NewCodec(3, secret(3))
	require.NoError(t, err)
	_, _, err = signer.DecodeVersion(late.Encode(r))
	require.NoError(t, err, "key 3 still signs")
	dropped, err := ring.WithKey(Key{ID: 1, Secret: secret(1)})
	require.NoError(t, err)
	require.Equal(t, keyIDs(ring), keyIDs(dropped))
}

// TestRingRefusesShortSecrets: a key whose secret is shorter than
// MinSecretLen is an error, and the ring applied to is kept.
func TestRingRefusesShortSecrets(t *testing.T) {
	ring := mustRing(t, Key{ID: 1, Secret: []byte(secretB)})
	_, err := ring.WithKey(Key{ID: 2, Secret: []byte(secretB[:MinSecretLen-1])})
	require.Error(t, err)
	require.Equal(t, []uint16{1}, keyIDs(ring))
}

// TestNewSecret: a new key's secret is secretLen random bytes, and a ring
// takes it.
func TestNewSecret(t *testing.T) {
	a, err := NewSecret()
	require.NoError(t, err)
	b, err := NewSecret()
	require.NoError(t, err)
	require.Len(t, a, secretLen)
	require.NotEqual(t, a, b)
	mustRing(t, Key{ID: 1, Secret: a})
}
