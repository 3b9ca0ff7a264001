package auth

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Perm is what an account may do with one topic or group: nothing (DENY),
// PUB, SUB or both. The zero value is DENY.
type Perm uint8

// Permissions, combinable with |.
const (
	// PermDeny holds no permission.
	PermDeny Perm = 0
	// PermPub sends to a topic.
	PermPub Perm = 1 << 0
	// PermSub consumes a topic, or as a group.
	PermSub Perm = 1 << 1
	// PermAny, asked for, is satisfied by PUB or SUB (reading a topic's
	// configuration); it is never held.
	PermAny Perm = 1 << 7
)

// String renders p in the ACL file's notation.
func (p Perm) String() string {
	switch p {
	case PermDeny:
		return "DENY"
	case PermPub:
		return "PUB"
	case PermSub:
		return "SUB"
	case PermPub | PermSub:
		return "PUB|SUB"
	case PermAny:
		return "PUB or SUB"
	}
	return fmt.Sprintf("Perm(%d)", uint8(p))
}

// ParsePerm parses DENY, PUB, SUB, PUB|SUB or SUB|PUB (upper case, as
// RocketMQ writes them).
func ParsePerm(s string) (Perm, error) {
	switch s {
	case "DENY":
		return PermDeny, nil
	case "PUB":
		return PermPub, nil
	case "SUB":
		return PermSub, nil
	case "PUB|SUB", "SUB|PUB":
		return PermPub | PermSub, nil
	}
	return 0, fmt.Errorf("permission %q: want DENY, PUB, SUB or PUB|SUB", s)
}

// allows reports whether holding p satisfies need.
func (p Perm) allows(need Perm) bool {
	if need == PermAny {
		return p != PermDeny
	}
	return need != PermDeny && p&need == need
}

// Kind is the kind of resource a permission is about.
type Kind uint8

// Resource kinds.
const (
	// Topic is a topic name.
	Topic Kind = iota
	// Group is a consumer group name.
	Group
)

// String names the kind.
func (k Kind) String() string {
	if k == Group {
		return "group"
	}
	return "topic"
}

// Account is one account of an ACL. It is immutable once loaded.
type Account struct {
	// AccessKey names the account (the user name of HTTP Basic, the
	// account claim of a bearer token).
	AccessKey string
	// Admin accounts may do everything.
	Admin bool
	// DefaultTopicPerm applies to topics not in TopicPerms.
	DefaultTopicPerm Perm
	// DefaultGroupPerm applies to groups not in GroupPerms.
	DefaultGroupPerm Perm
	// TopicPerms and GroupPerms are the per-resource permissions.
	TopicPerms map[string]Perm
	GroupPerms map[string]Perm

	// Limits are the account's abuse limits (the extension fields of the
	// file); an unset one takes the server's default.
	Limits Limits

	// secrets are the accepted secret keys (more than one while a key
	// is rotated); none means the account signs in with bearer tokens only.
	secrets []secret
	// plainSecret is set when a secret is written in clear in the file.
	plainSecret bool
	// signing are the secrets written in clear: the keys AWS SigV4
	// signatures (the SQS endpoint, package server/sqs) are checked with,
	// which need the secret itself, not a hash.
	signing []string
	// white, when not empty, lists the addresses the account may be
	// used from.
	white addressList
	// line is the account's line in the file (for messages).
	line int
}

// Limits are an account's abuse limits, set in the ACL file with the
// extension keys requestsPerSecond, messagesPerSecond and maxLongPolls. A
// nil field is not set (the server's default applies); 0 means unlimited.
type Limits struct {
	// RequestsPerSecond is the account's API request rate.
	RequestsPerSecond *float64
	// MessagesPerSecond is the rate of messages it may send (a batch of n
	// counts n).
	MessagesPerSecond *float64
	// MaxLongPolls is how many of its pulls may wait at once.
	MaxLongPolls *int
}

// Can reports whether the account may act with need on the resource
// name of kind.
func (a *Account) Can(kind Kind, name string, need Perm) bool {
	if a.Admin {
		return true
	}
	perms, def := a.TopicPerms, a.DefaultTopicPerm
	if kind == Group {
		perms, def = a.GroupPerms, a.DefaultGroupPerm
	}
	held, ok := perms[name]
	if !ok {
		held = def
	}
	return held.allows(need)
}

// SigningSecrets are the account's secrets written in clear (secretKey):
// AWS SigV4 signatures are HMACs keyed by the secret itself, so an
// account of secretKeyHash entries cannot sign them. The caller must not
// modify the slice.
func (a *Account) SigningSecrets() []string { return a.signing }

// AllowsAddress reports whether the account may be used from addr (its
// whiteRemoteAddress and the file's globalWhiteRemoteAddresses), for
// authentication schemes the Guard does not run itself (SigV4).
func (a *ACL) AllowsAddress(account *Account, addr netip.Addr) bool {
	return a.allowsAddress(addr) && account.allowsAddress(addr)
}

// allowsAddress reports whether the account may be used from addr.
func (a *Account) allowsAddress(addr netip.Addr) bool {
	return len(a.white) == 0 || a.white.match(addr)
}

// ACL is one loaded ACL file: immutable, swapped whole on reload.
type ACL struct {
	// globalWhite, when not empty, lists the only addresses any account
	// may authenticate from.
	globalWhite addressList
	accounts    map[string]*Account
	// order is the accessKeys in file order.
	order []string
	// dummy is verified when an accessKey is unknown, so that an
	// unknown key costs what a wrong secret costs.
	dummy secret
	// digest is the SHA-256 of the file content.
	digest [sha256.Size]byte
	// hasPlainSecret reports a secretKey written in clear.
	hasPlainSecret bool
	// cache remembers recently verified credentials of this ACL.
	cache *credentialCache
}

// Account returns the account with accessKey, or nil.
func (a *ACL) Account(accessKey string) *Account { return a.accounts[accessKey] }

// AccessKeys lists the accounts' access keys in file order.
func (a *ACL) AccessKeys() []string { return slices.Clone(a.order) }

// allowsAddress reports whether addr passes the global white list.
func (a *ACL) allowsAddress(addr netip.Addr) bool {
	return len(a.globalWhite) == 0 || a.globalWhite.match(addr)
}

// Limits of the file format.
const (
	// MaxFileSize is the largest ACL file read.
	MaxFileSize = 4 << 20
	// maxAccessKeyLength bounds an access key.
	maxAccessKeyLength = 128
	// minSecretLength is the shortest secret key accepted.
	minSecretLength = 8
	// maxSecretLength is the longest secret key accepted.
	maxSecretLength = 1024
	// maxResourceNameLength bounds a topic or group name.
	maxResourceNameLength = 255
	// maxRate bounds requestsPerSecond and messagesPerSecond.
	maxRate = 10_000_000
	// maxLongPolls bounds maxLongPolls.
	maxLongPolls = 1_000_000
)

// fileYAML is the top level of the file. Only the keys of topKeys exist.
type fileYAML struct {
	GlobalWhiteRemoteAddresses []string      `yaml:"globalWhiteRemoteAddresses"`
	Accounts                   []accountYAML `yaml:"accounts"`
}

// accountYAML is one entry of accounts.
type accountYAML struct {
	AccessKey          string     `yaml:"accessKey"`
	SecretKey          stringList `yaml:"secretKey"`
	SecretKeyHash      stringList `yaml:"secretKeyHash"`
	WhiteRemoteAddress stringList `yaml:"whiteRemoteAddress"`
	Admin              bool       `yaml:"admin"`
	DefaultTopicPerm   string     `yaml:"defaultTopicPerm"`
	DefaultGroupPerm   string     `yaml:"defaultGroupPerm"`
	TopicPerms         []string   `yaml:"topicPerms"`
	GroupPerms         []string   `yaml:"groupPerms"`
	RequestsPerSecond  *float64   `yaml:"requestsPerSecond"`
	MessagesPerSecond  *float64   `yaml:"messagesPerSecond"`
	MaxLongPolls       *int       `yaml:"maxLongPolls"`

	line int
	// set records which keys the entry has.
	set map[string]bool
}

// topKeys are the keys of the file's top level; dataVersion, which
// RocketMQ's broker writes when it updates the file, is accepted and
// ignored.
var topKeys = []string{"globalWhiteRemoteAddresses", "accounts", "dataVersion"}

// accountKeys are the keys of an account.
var accountKeys = []string{"accessKey", "secretKey", "secretKeyHash", "whiteRemoteAddress", "admin",
	"defaultTopicPerm", "defaultGroupPerm", "topicPerms", "groupPerms",
	// mqgate's extensions: abuse limits.
	"requestsPerSecond", "messagesPerSecond", "maxLongPolls"}

// checkKeys refuses a mapping key outside known, and a repeated key.
func checkKeys(node *yaml.Node, known []string, where string) (map[string]bool, error) {
	if node.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: %s must be a mapping", node.Line, where)
	}
	set := make(map[string]bool)
	for i := 0; i+1 < len(node.Content); i += 2 {
		k := node.Content[i]
		if !slices.Contains(known, k.Value) {
			return nil, fmt.Errorf("line %d: unknown key %q in %s (known: %s; keys are case-sensitive)",
				k.Line, k.Value, where, strings.Join(known, ", "))
		}
		if set[k.Value] {
			return nil, fmt.Errorf("line %d: key %q appears twice in %s", k.Line, k.Value, where)
		}
		set[k.Value] = true
	}
	return set, nil
}

// UnmarshalYAML decodes an account, refusing unknown keys.
func (a *accountYAML) UnmarshalYAML(node *yaml.Node) error {
	set, err := checkKeys(node, accountKeys, "an account")
	if err != nil {
		return err
	}
	type plain accountYAML
	var p plain
	if err := node.Decode(&p); err != nil {
		return err
	}
	*a = accountYAML(p)
	a.line, a.set = node.Line, set
	return nil
}

// stringList is a YAML string or a list of strings.
type stringList []string

// UnmarshalYAML accepts a scalar or a sequence of scalars.
func (l *stringList) UnmarshalYAML(node *yaml.Node) error {
	switch node.Kind {
	case yaml.ScalarNode:
		var s string
		if err := node.Decode(&s); err != nil {
			return err
		}
		*l = stringList{s}
		return nil
	case yaml.SequenceNode:
		var list []string
		if err := node.Decode(&list); err != nil {
			return err
		}
		*l = list
		return nil
	}
	return fmt.Errorf("line %d: want a string or a list of strings", node.Line)
}

// Parse reads an ACL file's content (RocketMQ's plain_acl.yml format; the
// package documentation lists the keys and the rules). Every problem is
// an error wrapping ErrInvalidACL that names the line.
func Parse(data []byte) (*ACL, error) {
	acl, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidACL, err)
	}
	return acl, nil
}

func parse(data []byte) (*ACL, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("the file is %d bytes; the limit is %d", len(data), MaxFileSize)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty; it needs at least an accounts list")
		}
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("line %d: a second YAML document; the file holds one", extra.Line)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("the file is not a YAML mapping")
	}
	root := doc.Content[0]
	set, err := checkKeys(root, topKeys, "the top level")
	if err != nil {
		return nil, err
	}
	if !set["accounts"] {
		return nil, errors.New("no accounts list (an empty list, accounts: [], denies everything)")
	}
	var f fileYAML
	if err := root.Decode(&f); err != nil {
		return nil, yamlError(err)
	}
	acl := &ACL{accounts: make(map[string]*Account), digest: sha256.Sum256(data)}
	for i, pattern := range f.GlobalWhiteRemoteAddresses {
		m, err := parseAddressPattern(pattern)
		if err != nil {
			return nil, fmt.Errorf("globalWhiteRemoteAddresses[%d]: %w", i, err)
		}
		acl.globalWhite = append(acl.globalWhite, m)
	}
	for _, y := range f.Accounts {
		a, err := y.account()
		if err != nil {
			return nil, fmt.Errorf("line %d: account %s: %w", y.line, quoteKey(y.AccessKey), err)
		}
		if prev, dup := acl.accounts[a.AccessKey]; dup {
			return nil, fmt.Errorf("line %d: accessKey %q is already the account of line %d", y.line, a.AccessKey, prev.line)
		}
		acl.accounts[a.AccessKey] = a
		acl.order = append(acl.order, a.AccessKey)
		acl.hasPlainSecret = acl.hasPlainSecret || a.plainSecret
	}
	acl.dummy, err = dummySecret(acl)
	if err != nil {
		return nil, err
	}
	acl.cache = newCredentialCache(defaultCacheSize, defaultCacheTTL)
	return acl, nil
}

// quoteKey renders an access key for an error message (cut to 64 bytes).
func quoteKey(k string) string {
	if k == "" {
		return "(no accessKey)"
	}
	if len(k) > 64 {
		k = k[:64] + "…"
	}
	return fmt.Sprintf("%q", k)
}

// account validates one entry.
func (y accountYAML) account() (*Account, error) {
	a := &Account{AccessKey: y.AccessKey, Admin: y.Admin, line: y.line}
	if err := checkAccessKey(y.AccessKey); err != nil {
		return nil, err
	}
	switch {
	case y.set["secretKey"] && y.set["secretKeyHash"]:
		return nil, errors.New("both secretKey and secretKeyHash are given; keep one (secretKeyHash, so that the file holds no plain secret)")
	case y.set["secretKey"]:
		if len(y.SecretKey) == 0 {
			return nil, errors.New("secretKey is an empty list")
		}
		for i, s := range y.SecretKey {
			if len(s) < minSecretLength || len(s) > maxSecretLength {
				return nil, fmt.Errorf("secretKey[%d] is %d bytes; it must be %d-%d", i, len(s), minSecretLength, maxSecretLength)
			}
			a.secrets = append(a.secrets, newPlainSecret(s))
			a.signing = append(a.signing, s)
		}
		a.plainSecret = true
	case y.set["secretKeyHash"]:
		if len(y.SecretKeyHash) == 0 {
			return nil, errors.New("secretKeyHash is an empty list")
		}
		for i, h := range y.SecretKeyHash {
			s, err := parseSecretHash(h)
			if err != nil {
				return nil, fmt.Errorf("secretKeyHash[%d]: %w", i, err)
			}
			a.secrets = append(a.secrets, s)
		}
	}
	for i, pattern := range y.WhiteRemoteAddress {
		m, err := parseAddressPattern(pattern)
		if err != nil {
			return nil, fmt.Errorf("whiteRemoteAddress[%d]: %w", i, err)
		}
		a.white = append(a.white, m)
	}
	var err error
	if a.DefaultTopicPerm, err = optionalPerm(y.DefaultTopicPerm); err != nil {
		return nil, fmt.Errorf("defaultTopicPerm: %w", err)
	}
	if a.DefaultGroupPerm, err = optionalPerm(y.DefaultGroupPerm); err != nil {
		return nil, fmt.Errorf("defaultGroupPerm: %w", err)
	}
	if a.TopicPerms, err = parseResourcePerms(y.TopicPerms, "topicPerms"); err != nil {
		return nil, err
	}
	if a.GroupPerms, err = parseResourcePerms(y.GroupPerms, "groupPerms"); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		name  string
		value *float64
	}{{"requestsPerSecond", y.RequestsPerSecond}, {"messagesPerSecond", y.MessagesPerSecond}} {
		if r.value != nil && (*r.value < 0 || *r.value > maxRate || *r.value != *r.value) {
			return nil, fmt.Errorf("%s %v must be 0 (unlimited) to %d", r.name, *r.value, maxRate)
		}
	}
	if y.MaxLongPolls != nil && (*y.MaxLongPolls < 0 || *y.MaxLongPolls > maxLongPolls) {
		return nil, fmt.Errorf("maxLongPolls %d must be 0 (unlimited) to %d", *y.MaxLongPolls, maxLongPolls)
	}
	a.Limits = Limits{RequestsPerSecond: y.RequestsPerSecond, MessagesPerSecond: y.MessagesPerSecond, MaxLongPolls: y.MaxLongPolls}
	return a, nil
}

// checkAccessKey: 1-128 printable ASCII characters without a colon (HTTP
// Basic ends the user name at the first colon) or a space.
func checkAccessKey(k string) error {
	if k == "" {
		return errors.New("accessKey is missing")
	}
	if len(k) > maxAccessKeyLength {
		return fmt.Errorf("accessKey is %d bytes; the limit is %d", len(k), maxAccessKeyLength)
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || c == ':' {
			return fmt.Errorf("accessKey has %q at byte %d; it must be printable ASCII without spaces or ':'", c, i)
		}
	}
	return nil
}

// optionalPerm parses a default permission; an absent one is DENY.
func optionalPerm(s string) (Perm, error) {
	if s == "" {
		return PermDeny, nil
	}
	return ParsePerm(s)
}

// parseResourcePerms parses ["orders=SUB", "audit=PUB|SUB"].
func parseResourcePerms(entries []string, field string) (map[string]Perm, error) {
	out := make(map[string]Perm, len(entries))
	for i, e := range entries {
		name, permText, ok := strings.Cut(e, "=")
		name, permText = strings.TrimSpace(name), strings.TrimSpace(permText)
		if !ok {
			return nil, fmt.Errorf("%s[%d] %q: want name=PERM, e.g. orders=SUB", field, i, e)
		}
		if err := checkResourceName(name); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		perm, err := ParsePerm(permText)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s[%d]: %q is listed twice", field, i, name)
		}
		out[name] = perm
	}
	return out, nil
}

// checkResourceName: 1-255 of A-Z a-z 0-9 _ - % (the gateway's names).
func checkResourceName(name string) error {
	if name == "" || len(name) > maxResourceNameLength {
		return fmt.Errorf("name %q must be 1-%d characters", name, maxResourceNameLength)
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '%':
		default:
			return fmt.Errorf("name %q has %q; names are A-Z a-z 0-9 _ - (%% for system names)", name, c)
		}
	}
	return nil
}

// yamlError shortens the YAML library's messages ("yaml: line 3: …").
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
	return errors.New(msg)
}
