package storage

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mqgate/mqgate/storage/internal/vfs"
	"github.com/mqgate/mqgate/storage/message"
)

// storeIDFile caches the store id (see "Store id" in doc.go): 16 hex digits
// and a newline. The log is the authority; the file only names the id of
// a store whose log holds no record yet.
const storeIDFile = "storeid"

// StoreID returns the id that names this store in every message id.
func (s *Store) StoreID() message.Host {
	var id message.Host
	binary.BigEndian.PutUint64(id[:], s.storeID.Load())
	return id
}

// setStoreID sets the store id (at open; from a leader's frames).
func (s *Store) setStoreID(id message.Host) { s.storeID.Store(binary.BigEndian.Uint64(id[:])) }

// loadStoreID decides the store id at open: the store field of the newest
// record the ConsumeQueues know (so a data dir written before store ids
// keeps the host its ids already carry, and a replica that copied a log
// takes the id of that log), else the cached file, else opts.StoreID or a
// random id for a store that has never written. The file is rewritten
// when it is missing or disagrees with the log.
func (s *Store) loadStoreID() error {
	fs, path := s.opts.FS, filepath.Join(s.opts.Dir, storeIDFile)
	cached, fileErr := readStoreID(fs, path)
	if fileErr != nil && !errors.Is(fileErr, os.ErrNotExist) {
		s.log.Warn().Err(fileErr).Msg("store id file unreadable; taking the id from the log")
	}
	id, fromLog := s.newestStoreField()
	switch {
	case fromLog && fileErr == nil && id == cached:
		s.setStoreID(id)
		return nil
	case fromLog:
		if fileErr == nil {
			s.log.Warn().Str("file", hex.EncodeToString(cached[:])).Str("log", hex.EncodeToString(id[:])).
				Msg("store id file disagrees with the log; the log's id is kept")
		}
	case fileErr == nil:
		s.setStoreID(cached)
		return nil
	case s.opts.StoreID != (message.Host{}):
		id = s.opts.StoreID
	default:
		if _, err := rand.Read(id[:]); err != nil {
			return fmt.Errorf("choose a store id: %w", err)
		}
	}
	s.setStoreID(id)
	return vfs.WriteFileAtomic(fs, path, []byte(hex.EncodeToString(id[:])+"\n"), 0o644)
}

// newestStoreField returns the store field of the newest record the
// ConsumeQueues index, if one can be read.
func (s *Store) newestStoreField() (message.Host, bool) {
	newest := int64(-1)
	s.queuesMu.RLock()
	for _, q := range s.queues {
		if e, ok := q.LastEntry(); ok && e.CommitLogOffset > newest {
			newest = e.CommitLogOffset
		}
	}
	s.queuesMu.RUnlock()
	if newest < 0 {
		return message.Host{}, false
	}
	m, _, err := s.lookup(newest)
	if err != nil {
		s.log.Warn().Err(err).Int64("offset", newest).Msg("newest record unreadable; store id from its file")
		return message.Host{}, false
	}
	return m.StoreHost, true
}

func readStoreID(fs vfs.FS, path string) (message.Host, error) {
	var id message.Host
	b, err := fs.ReadFile(path)
	if err != nil {
		return id, err
	}
	text := strings.TrimSpace(string(b))
	if len(text) != 2*len(id) {
		return id, fmt.Errorf("%s: %d characters, want %d hex digits", path, len(text), 2*len(id))
	}
	if _, err := hex.Decode(id[:], []byte(text)); err != nil {
		return id, fmt.Errorf("%s: %w", path, err)
	}
	return id, nil
}
