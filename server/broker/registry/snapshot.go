package registry

import (
	"encoding/json"
	"maps"

	"github.com/mqgate/mqgate/server/broker/receipt"
)

// The snapshot files, under the broker's config directory. Each says up
// to which queue offset of rmq_sys_META it is complete (doc.go, "The
// snapshot files").
const (
	TopicsFile      = "topics.json"
	GroupsFile      = "groups.json"
	ReceiptKeysFile = "receipt-keys.json"
)

// SnapshotVersion marks the snapshot format of the three files (version 1
// files were bare maps, without the meta offset).
const SnapshotVersion = 2

// TopicEntry is one member of topics.json: a topic, a deleted topic name's
// tombstone (Deleted, with no queues), or both (a name deleted and created
// again).
type TopicEntry struct {
	TopicConfig
	Deleted *Tombstone `json:",omitempty"`
}

// topicsSnapshot is config/topics.json.
type topicsSnapshot struct {
	Version int `json:"version"`
	// MetaOffset: the snapshot holds every rmq_sys_META record below it.
	MetaOffset int64                 `json:"metaOffset"`
	Topics     map[string]TopicEntry `json:"topics"`
}

// groupsSnapshot is config/groups.json.
type groupsSnapshot struct {
	Version    int                    `json:"version"`
	MetaOffset int64                  `json:"metaOffset"`
	Groups     map[string]GroupConfig `json:"groups"`
}

// receiptKeysSnapshot is config/receipt-keys.json.
type receiptKeysSnapshot struct {
	Version    int           `json:"version"`
	MetaOffset int64         `json:"metaOffset"`
	Keys       []receipt.Key `json:"keys"`
}

// encodeFile is the text of a snapshot file.
func encodeFile(v any) ([]byte, error) {
	return json.MarshalIndent(v, "", "  ")
}

// EncodeTopics is topics.json of the state, complete up to metaOffset.
func (s *State) EncodeTopics(metaOffset int64) ([]byte, error) {
	entries := make(map[string]TopicEntry, len(s.topics)+len(s.tombs))
	for name, t := range s.topics {
		entries[name] = TopicEntry{TopicConfig: t}
	}
	for name, tomb := range s.tombs {
		e := entries[name]
		if e.Name == "" {
			e.Name = name
		}
		e.Deleted = &tomb
		entries[name] = e
	}
	return encodeFile(topicsSnapshot{Version: SnapshotVersion, MetaOffset: metaOffset, Topics: entries})
}

// EncodeGroups is groups.json of the state, complete up to metaOffset.
func (s *State) EncodeGroups(metaOffset int64) ([]byte, error) {
	return encodeFile(groupsSnapshot{Version: SnapshotVersion, MetaOffset: metaOffset, Groups: s.groups})
}

// EncodeReceiptKeys is receipt-keys.json of the state, complete up to
// metaOffset.
func (s *State) EncodeReceiptKeys(metaOffset int64) ([]byte, error) {
	return encodeFile(receiptKeysSnapshot{Version: SnapshotVersion, MetaOffset: metaOffset, Keys: s.ring.Load().Keys()})
}

// decodeFile decodes a snapshot file into versioned, or, when it has no
// numeric "version" member, a version 1 file (a bare map) into legacy. It
// reports whether the file was versioned; on an error, what decoded before
// it is left in place (as json.Unmarshal leaves it).
func decodeFile(data []byte, versioned, legacy any) (bool, error) {
	var probe struct {
		Version json.RawMessage `json:"version"`
	}
	if json.Unmarshal(data, &probe) == nil && len(probe.Version) > 0 && probe.Version[0] >= '0' && probe.Version[0] <= '9' {
		return true, json.Unmarshal(data, versioned)
	}
	return false, json.Unmarshal(data, legacy)
}

// DecodeTopics decodes topics.json: its entries by name, and the
// rmq_sys_META offset it is complete up to — 0 for a version 1 file (read,
// but not trusted to cover any record) and for one that does not decode.
// On an error the entries are what decoded before it, to be used all the
// same: the records from offset 0 on are applied over them.
func DecodeTopics(data []byte) (map[string]TopicEntry, int64, error) {
	var snap topicsSnapshot
	var legacy map[string]TopicEntry
	versioned, err := decodeFile(data, &snap, &legacy)
	if snap.Topics == nil {
		snap.Topics = legacy
	}
	if err != nil || !versioned {
		return snap.Topics, 0, err
	}
	return snap.Topics, snap.MetaOffset, nil
}

// DecodeGroups decodes groups.json as DecodeTopics does topics.json.
func DecodeGroups(data []byte) (map[string]GroupConfig, int64, error) {
	var snap groupsSnapshot
	var legacy map[string]GroupConfig
	versioned, err := decodeFile(data, &snap, &legacy)
	if snap.Groups == nil {
		snap.Groups = legacy
	}
	if err != nil || !versioned {
		return snap.Groups, 0, err
	}
	return snap.Groups, snap.MetaOffset, nil
}

// DecodeReceiptKeys decodes receipt-keys.json as DecodeTopics does
// topics.json. The file never had a version 1: an unversioned one that
// decodes (a JSON array of keys) yields no key.
func DecodeReceiptKeys(data []byte) ([]receipt.Key, int64, error) {
	var snap receiptKeysSnapshot
	var legacy []receipt.Key
	versioned, err := decodeFile(data, &snap, &legacy)
	if err != nil || !versioned {
		return snap.Keys, 0, err
	}
	return snap.Keys, snap.MetaOffset, nil
}

// InstallTopics adds the entries of topics.json: a tombstone for each
// entry Deleted, and a topic for each entry not Deleted or with queues.
func (s *State) InstallTopics(entries map[string]TopicEntry) {
	topics, tombs := maps.Clone(s.topics), maps.Clone(s.tombs)
	for name, e := range entries {
		if e.Deleted != nil {
			tombs[name] = *e.Deleted
		}
		if e.Deleted == nil || e.Queues > 0 {
			topics[name] = e.TopicConfig
		}
	}
	s.topics, s.tombs = topics, tombs
}

// InstallGroups adds the groups of groups.json.
func (s *State) InstallGroups(groups map[string]GroupConfig) {
	next := maps.Clone(s.groups)
	for name, g := range groups {
		next[name] = g
	}
	s.groups = next
}

// InstallKey adds a key of receipt-keys.json to the ring, or refuses it
// (receipt.Ring.WithKey) and changes nothing.
func (s *State) InstallKey(k receipt.Key) error {
	return s.addKey(k)
}
