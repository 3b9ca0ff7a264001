package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"
)

// secret verifies one accepted secret key.
type secret interface {
	// verify reports, in time that does not depend on where candidate
	// and the secret differ, whether candidate is the secret.
	verify(candidate []byte) bool
	// slow reports a password hash (worth caching and worth bounding the
	// concurrency of).
	slow() bool
}

// plainSecret is a secretKey written in clear. Candidates are compared
// by SHA-256, in constant time and independent of their length.
type plainSecret struct{ sum [sha256.Size]byte }

func newPlainSecret(s string) plainSecret { return plainSecret{sha256.Sum256([]byte(s))} }

func (p plainSecret) verify(candidate []byte) bool {
	sum := sha256.Sum256(candidate)
	return subtle.ConstantTimeCompare(sum[:], p.sum[:]) == 1
}

func (plainSecret) slow() bool { return false }

// bcryptSecret is a bcrypt hash ($2a$, $2b$ or $2y$).
type bcryptSecret struct{ hash []byte }

func (b bcryptSecret) verify(candidate []byte) bool {
	// bcrypt reads at most 72 bytes; a longer candidate is never the secret.
	if len(candidate) > 72 {
		_ = bcrypt.CompareHashAndPassword(b.hash, candidate[:72]) // same cost
		return false
	}
	return bcrypt.CompareHashAndPassword(b.hash, candidate) == nil
}

func (bcryptSecret) slow() bool { return true }

// argon2Secret is an argon2id hash in PHC string form
// ($argon2id$v=19$m=65536,t=3,p=4$salt$key, unpadded standard base64).
type argon2Secret struct {
	memory  uint32 // KiB
	time    uint32
	threads uint8
	salt    []byte
	key     []byte
}

func (a argon2Secret) verify(candidate []byte) bool {
	key := argon2.IDKey(candidate, a.salt, a.time, a.memory, a.threads, uint32(len(a.key)))
	return subtle.ConstantTimeCompare(key, a.key) == 1
}

func (argon2Secret) slow() bool { return true }

// Bounds of argon2id parameters (a typo must not make every sign-in take
// minutes or gigabytes).
const (
	maxArgon2Memory = 1 << 20 // KiB (1 GiB)
	maxArgon2Time   = 64
	minArgon2Salt   = 8
	minArgon2Key    = 16
	maxArgon2Key    = 128
)

// errHashFormat describes the accepted hash forms.
var errHashFormat = errors.New("want an argon2id PHC string ($argon2id$v=19$m=65536,t=3,p=4$salt$hash) or a bcrypt hash ($2a$, $2b$ or $2y$)")

// parseSecretHash parses a secretKeyHash.
func parseSecretHash(h string) (secret, error) {
	switch {
	case strings.HasPrefix(h, "$argon2id$"):
		return parseArgon2id(h)
	case strings.HasPrefix(h, "$argon2"):
		return nil, fmt.Errorf("%.10s…: only argon2id is accepted (argon2i and argon2d are not)", h)
	case strings.HasPrefix(h, "$2a$"), strings.HasPrefix(h, "$2b$"), strings.HasPrefix(h, "$2y$"):
		if _, err := bcrypt.Cost([]byte(h)); err != nil {
			return nil, fmt.Errorf("bcrypt hash: %v", err)
		}
		return bcryptSecret{hash: []byte(h)}, nil
	}
	return nil, errHashFormat
}

// parseArgon2id parses $argon2id$v=19$m=…,t=…,p=…$salt$key.
func parseArgon2id(h string) (secret, error) {
	parts := strings.Split(h, "$")
	// "", "argon2id", "v=19", "m=…,t=…,p=…", salt, key
	if len(parts) != 6 {
		return nil, errHashFormat
	}
	if parts[2] != "v=19" {
		return nil, fmt.Errorf("argon2id hash: version %q; want v=19", parts[2])
	}
	var a argon2Secret
	seen := map[string]bool{}
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if !ok || err != nil || seen[k] {
			return nil, fmt.Errorf("argon2id hash: parameter %q; want m=<KiB>,t=<passes>,p=<lanes>", kv)
		}
		seen[k] = true
		switch k {
		case "m":
			a.memory = uint32(n)
		case "t":
			a.time = uint32(n)
		case "p":
			if n > 255 {
				return nil, fmt.Errorf("argon2id hash: p=%d is over 255", n)
			}
			a.threads = uint8(n)
		default:
			return nil, fmt.Errorf("argon2id hash: unknown parameter %q", k)
		}
	}
	switch {
	case !seen["m"] || !seen["t"] || !seen["p"]:
		return nil, errors.New("argon2id hash: m, t and p are all required")
	case a.threads < 1 || a.time < 1 || a.time > maxArgon2Time:
		return nil, fmt.Errorf("argon2id hash: t must be 1-%d and p at least 1", maxArgon2Time)
	case a.memory < 8*uint32(a.threads) || a.memory > maxArgon2Memory:
		return nil, fmt.Errorf("argon2id hash: m=%d KiB must be between 8×p and %d", a.memory, maxArgon2Memory)
	}
	var err error
	if a.salt, err = base64.RawStdEncoding.Strict().DecodeString(parts[4]); err != nil || len(a.salt) < minArgon2Salt {
		return nil, fmt.Errorf("argon2id hash: the salt must be unpadded base64 of at least %d bytes", minArgon2Salt)
	}
	if a.key, err = base64.RawStdEncoding.Strict().DecodeString(parts[5]); err != nil || len(a.key) < minArgon2Key || len(a.key) > maxArgon2Key {
		return nil, fmt.Errorf("argon2id hash: the hash must be unpadded base64 of %d-%d bytes", minArgon2Key, maxArgon2Key)
	}
	return a, nil
}

// HashArgon2id returns the PHC string of secret with RFC 9106's second
// recommended parameter set (m=64 MiB, t=3, p=4) and a random salt: the
// value for secretKeyHash.
func HashArgon2id(secretKey string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	const memory, time, threads = 64 << 10, 3, 4
	key := argon2.IDKey([]byte(secretKey), salt, time, memory, threads, 32)
	return fmt.Sprintf("$argon2id$v=19$m=%d,t=%d,p=%d$%s$%s", memory, time, threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// dummySecret is what an unknown accessKey is checked against: a secret
// of the same kind and cost as the file's first hashed account (or a plain
// one when there is none), of random content nobody knows.
func dummySecret(acl *ACL) (secret, error) {
	random := make([]byte, 32)
	if _, err := rand.Read(random); err != nil {
		return nil, err
	}
	for _, k := range acl.order {
		for _, s := range acl.accounts[k].secrets {
			switch s := s.(type) {
			case bcryptSecret:
				cost, _ := bcrypt.Cost(s.hash)
				h, err := bcrypt.GenerateFromPassword(random[:16], cost)
				if err != nil {
					return nil, err
				}
				return bcryptSecret{hash: h}, nil
			case argon2Secret:
				d := s
				d.key = make([]byte, len(s.key))
				if _, err := rand.Read(d.key); err != nil {
					return nil, err
				}
				return d, nil
			}
		}
	}
	return newPlainSecret(string(random)), nil
}
