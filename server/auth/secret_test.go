package auth

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

func TestSecretHashes(t *testing.T) {
	t.Run("Argon2id", func(t *testing.T) {
		phc, err := HashArgon2id("correct horse")
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(phc, "$argon2id$v=19$m=65536,t=3,p=4$"), phc)
		s, err := parseSecretHash(phc)
		require.NoError(t, err)
		require.True(t, s.slow())
		require.True(t, s.verify([]byte("correct horse")))
		require.False(t, s.verify([]byte("correct horsf")))
		require.False(t, s.verify(nil))
	})
	t.Run("Argon2idReferenceVector", func(t *testing.T) {
		// Printed by the reference implementation's CLI (Debian package argon2): echo -n password | argon2 somesalt -id -t 2 -m 16 -p 4 -e
		s, err := parseSecretHash("$argon2id$v=19$m=65536,t=2,p=4$c29tZXNhbHQ$GpZ3sK/oH9p7VIiV56G/64Zo/8GaUw434IimaPqxwCo")
		require.NoError(t, err)
		require.True(t, s.verify([]byte("password")))
		require.False(t, s.verify([]byte("Password")))
	})
	t.Run("Bcrypt", func(t *testing.T) {
		for _, prefix := range []string{"$2a$", "$2b$", "$2y$"} {
			h, err := bcrypt.GenerateFromPassword([]byte("s3cret-key"), bcrypt.MinCost)
			require.NoError(t, err)
			hash := prefix + string(h[4:]) // htpasswd writes $2y$
			s, err := parseSecretHash(hash)
			require.NoError(t, err, hash)
			require.True(t, s.verify([]byte("s3cret-key")), prefix)
			require.False(t, s.verify([]byte("s3cret-kez")), prefix)
			require.False(t, s.verify([]byte(strings.Repeat("x", 100))), prefix)
		}
		_, err := parseSecretHash("$2a$10$tooShort")
		require.Error(t, err)
	})
	t.Run("Plain", func(t *testing.T) {
		s := newPlainSecret("plain-secret")
		require.False(t, s.slow())
		require.True(t, s.verify([]byte("plain-secret")))
		require.False(t, s.verify([]byte("plain-secre")))
		require.False(t, s.verify([]byte("plain-secret\x00")))
	})
	t.Run("BadArgon2id", func(t *testing.T) {
		for _, h := range []string{
			"$argon2id$v=16$m=65536,t=3,p=4$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
			"$argon2id$v=19$m=65536,t=3$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
			"$argon2id$v=19$m=65536,t=3,p=4,x=1$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
			"$argon2id$v=19$m=65536,t=0,p=4$c29tZXNhbHQ$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
			"$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
			"$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$c2hvcnQ",
			"$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ=$CTFhFdXPJO1aFaMaO6Mm5c8y7cJHAph8ArZWb2GRPPc",
		} {
			_, err := parseSecretHash(h)
			require.Error(t, err, h)
		}
	})
}

func TestDummySecretMatchesTheFirstHash(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("bcrypt-secret"), 5)
	require.NoError(t, err)
	acl, err := Parse([]byte("accounts:\n  - accessKey: plain-one\n    secretKey: plain-secret\n  - accessKey: hashed\n    secretKeyHash: \"" + string(h) + "\"\n"))
	require.NoError(t, err)
	d, ok := acl.dummy.(bcryptSecret)
	require.True(t, ok, "%T", acl.dummy)
	cost, err := bcrypt.Cost(d.hash)
	require.NoError(t, err)
	require.Equal(t, 5, cost)

	acl, err = Parse([]byte("accounts:\n  - accessKey: plain-one\n    secretKey: plain-secret\n"))
	require.NoError(t, err)
	require.IsType(t, plainSecret{}, acl.dummy)
}
