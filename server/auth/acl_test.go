package auth

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"
)

const exampleACL = `
globalWhiteRemoteAddresses: ["127.0.0.1", "10.0.*"]
accounts:
  - accessKey: billing-worker
    secretKey: "billing-secret-1"
    whiteRemoteAddress: "10.0.1.*"
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["orders=SUB", "audit=PUB|SUB", "quiet=DENY"]
    groupPerms: ["billing=SUB", "other=DENY"]
  - accessKey: root-admin
    secretKey: ["old-admin-secret", "new-admin-secret"]
    admin: true
`

func TestParseExample(t *testing.T) {
	acl, err := Parse([]byte(exampleACL))
	require.NoError(t, err)
	require.Equal(t, []string{"billing-worker", "root-admin"}, acl.AccessKeys())
	require.True(t, acl.hasPlainSecret)

	w := acl.Account("billing-worker")
	require.NotNil(t, w)
	require.False(t, w.Admin)
	cases := []struct {
		kind Kind
		name string
		need Perm
		want bool
	}{
		{Topic, "orders", PermSub, true},
		{Topic, "orders", PermPub, false},
		{Topic, "orders", PermAny, true},
		{Topic, "audit", PermPub, true},
		{Topic, "audit", PermSub, true},
		{Topic, "quiet", PermAny, false},
		{Topic, "unlisted", PermAny, false}, // defaultTopicPerm DENY
		{Group, "billing", PermSub, true},
		{Group, "unlisted", PermSub, true}, // defaultGroupPerm SUB
		{Group, "other", PermSub, false},   // explicit DENY beats the default
		{Group, "billing", PermPub, false},
	}
	for _, c := range cases {
		require.Equal(t, c.want, w.Can(c.kind, c.name, c.need), "%s %s %s", c.kind, c.name, c.need)
	}
	admin := acl.Account("root-admin")
	require.True(t, admin.Can(Topic, "anything", PermPub|PermSub))
	require.Len(t, admin.secrets, 2)
	require.True(t, admin.secrets[0].verify([]byte("old-admin-secret")))
	require.True(t, admin.secrets[1].verify([]byte("new-admin-secret")))

	require.True(t, acl.allowsAddress(netip.MustParseAddr("10.0.200.3")))
	require.False(t, acl.allowsAddress(netip.MustParseAddr("10.1.0.1")))
	require.True(t, w.allowsAddress(netip.MustParseAddr("10.0.1.9")))
	require.False(t, w.allowsAddress(netip.MustParseAddr("10.0.2.9")))
	require.True(t, admin.allowsAddress(netip.MustParseAddr("10.1.0.1")), "no whiteRemoteAddress: any address")
	require.Nil(t, acl.Account("nobody"))
}

func TestParseDefaultsDeny(t *testing.T) {
	acl, err := Parse([]byte("accounts:\n  - accessKey: minimal\n    secretKey: minimal-secret\n"))
	require.NoError(t, err)
	a := acl.Account("minimal")
	require.False(t, a.Can(Topic, "t", PermAny))
	require.False(t, a.Can(Group, "g", PermSub))

	acl, err = Parse([]byte("accounts: []\n"))
	require.NoError(t, err)
	require.Empty(t, acl.AccessKeys())

	acl, err = Parse([]byte("dataVersion:\n  - counter: 3\n    timestamp: 1700000000000\naccounts: []\n"))
	require.NoError(t, err, "RocketMQ's dataVersion is accepted")
	require.Empty(t, acl.AccessKeys())
}

func TestParseRefuses(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("some-secret"), bcrypt.MinCost)
	require.NoError(t, err)
	account := func(body string) string { return "accounts:\n  - accessKey: worker-one\n" + body }
	cases := []struct {
		name, file, want string
	}{
		{"Empty", "", "empty"},
		{"NotMapping", "- a\n", "must be a mapping"},
		{"NoAccounts", "globalWhiteRemoteAddresses: []\n", "no accounts list"},
		{"UnknownTopKey", "acounts: []\n", `unknown key "acounts"`},
		{"UnknownAccountKey", account("    secretkey: abcdefgh\n"), `line 3: unknown key "secretkey" in an account`},
		{"RepeatedKey", account("    admin: true\n    admin: false\n"), `"admin" appears twice`},
		{"BadPerm", account("    defaultTopicPerm: READ\n"), `defaultTopicPerm: permission "READ"`},
		{"LowerCasePerm", account("    topicPerms: [\"orders=sub\"]\n"), `topicPerms[0]: permission "sub"`},
		{"PermWithoutName", account("    topicPerms: [\"SUB\"]\n"), `want name=PERM`},
		{"BadResourceName", account("    groupPerms: [\"a.b=SUB\"]\n"), `groupPerms[0]: name "a.b"`},
		{"RepeatedResource", account("    topicPerms: [\"a=SUB\", \"a=PUB\"]\n"), `"a" is listed twice`},
		{"BothSecrets", account("    secretKey: abcdefgh\n    secretKeyHash: \"" + string(hash) + "\"\n"), "both secretKey and secretKeyHash"},
		{"ShortSecret", account("    secretKey: short\n"), "secretKey[0] is 5 bytes"},
		{"BadHash", account("    secretKeyHash: \"plain-text\"\n"), "want an argon2id PHC string"},
		{"Argon2i", account("    secretKeyHash: \"$argon2i$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA\"\n"), "only argon2id"},
		{"Argon2idHugeMemory", account("    secretKeyHash: \"$argon2id$v=19$m=99999999,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA\"\n"), "m=99999999"},
		{"BadWhite", account("    whiteRemoteAddress: \"10.0.*.1\"\n"), "only * may follow"},
		{"BadGlobalWhite", "globalWhiteRemoteAddresses: [\"300.1.1.1\"]\naccounts: []\n", "globalWhiteRemoteAddresses[0]"},
		{"NoAccessKey", "accounts:\n  - secretKey: abcdefgh\n", "accessKey is missing"},
		{"ColonInAccessKey", "accounts:\n  - accessKey: \"a:b\"\n", "without spaces or ':'"},
		{"DuplicateAccessKey", "accounts:\n  - accessKey: same\n  - accessKey: same\n", `line 3: accessKey "same" is already the account of line 2`},
		{"AdminNotBool", account("    admin: yes-please\n"), "line 3"},
		{"TwoDocuments", "accounts: []\n---\naccounts: []\n", "second YAML document"},
		{"Tabs", "accounts:\n\t- accessKey: x\n", "line 2"},
		{"NegativeRate", account("    requestsPerSecond: -1\n"), "requestsPerSecond -1 must be 0 (unlimited)"},
		{"RateNotNumber", account("    messagesPerSecond: fast\n"), "line 3"},
		{"NegativeLongPolls", account("    maxLongPolls: -2\n"), "maxLongPolls -2 must be 0 (unlimited)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.file))
			require.ErrorIs(t, err, ErrInvalidACL)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "abcdefgh", "an error never quotes a secret")
		})
	}
	_, err = Parse([]byte(strings.Repeat(" ", MaxFileSize+1)))
	require.ErrorContains(t, err, "the limit is")
}

// TestParseLimits: the abuse-limit extension keys are read; absent ones
// stay unset (the server's defaults apply).
func TestParseLimits(t *testing.T) {
	acl, err := Parse([]byte("accounts:\n  - accessKey: a\n    requestsPerSecond: 2.5\n    messagesPerSecond: 0\n    maxLongPolls: 7\n  - accessKey: b\n"))
	require.NoError(t, err)
	l := acl.Account("a").Limits
	require.Equal(t, 2.5, *l.RequestsPerSecond)
	require.Equal(t, 0.0, *l.MessagesPerSecond)
	require.Equal(t, 7, *l.MaxLongPolls)
	require.Equal(t, Limits{}, acl.Account("b").Limits)
}
