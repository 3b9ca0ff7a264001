package registry

import (
	"errors"
	"fmt"
	"os"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/broker/receipt"
)

// The receipt keyring lives in the registry (State.Ring, applied from the
// rmq_sys_META records of kind receipt.MetaKind by State.Apply), its
// snapshot is config/receipt-keys.json beside topics.json, and the two
// requests below propose key records. The secret and the time of a key
// are chosen by the request that proposes it (the first open, a
// rotation); applying the record only adds it.

// LegacyKeyFile held the receipt key before the keyring, under the
// broker's meta directory; it is adopted as key receipt.LegacyKeyID.
const LegacyKeyFile = "receipt.key"

// EnsureReceiptKey gives a registry without a key its first one: the
// receipt.key of a data dir from before the keyring (so its receipts
// still settle), else a new random key. used reports a data dir that
// already holds records: a keyring missing there was lost with its
// records and snapshot (or receipt.key deleted before an upgrade), and
// the receipts handed out before no longer verify, which is logged to log
// as an error.
func (s *Service) EnsureReceiptKey(used bool, nowMs int64, log zerolog.Logger) error {
	if s.state.Ring() != nil {
		return nil
	}
	key := receipt.Key{ID: receipt.LegacyKeyID, CreatedMs: nowMs}
	legacy, err := s.cfg.Store.ReadMeta(LegacyKeyFile)
	switch {
	case err == nil && len(legacy) >= receipt.MinSecretLen:
		key.Secret = legacy
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("read %s: %w", LegacyKeyFile, err)
	default:
		if key.Secret, err = receipt.NewSecret(); err != nil {
			return err
		}
		if used {
			ev := log.Error()
			if p, ok := s.cfg.Store.(interface{ MetaPath(string) string }); ok {
				ev = ev.Str("file", p.MetaPath(ReceiptKeysFile))
			}
			ev.Msg("the receipt keyring was missing from a data dir that holds messages (its records and config/receipt-keys.json, " +
				"or config/receipt.key before an upgrade, were lost), and a new key was made: " +
				"every receipt issued before this start is now invalid, acks, nacks and lease changes with one answer \"invalid\", " +
				"and the messages leased with them are delivered again when their leases expire")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commitLocked(Record{Kind: KindReceiptKey, Key: &key})
}

// RotateReceiptKey adds a new receipt key (a new random secret, created
// now) to the keyring, where it is the one that signs, and returns its
// id.
func (s *Service) RotateReceiptKey() (int, error) {
	secret, err := receipt.NewSecret()
	if err != nil {
		return 0, err
	}
	key := receipt.Key{CreatedMs: s.cfg.Clock.Now().UnixMilli(), Secret: secret}
	s.mu.Lock()
	defer s.mu.Unlock()
	key.ID = s.state.Ring().NextID()
	if key.ID == 0 {
		return 0, fmt.Errorf("%w: the receipt keyring has used every key id", s.cfg.InvalidArgument)
	}
	if err := s.commitLocked(Record{Kind: KindReceiptKey, Key: &key}); err != nil {
		return 0, err
	}
	return int(key.ID), nil
}
