package broker

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Limits and defaults of a group's push endpoint (PushConfig).
const (
	// DefaultPushConcurrency is PushConfig.MaxConcurrency when zero.
	DefaultPushConcurrency = 8
	// MaxPushConcurrency caps PushConfig.MaxConcurrency.
	MaxPushConcurrency = 256
	// DefaultPushTimeout is PushConfig.Timeout when zero.
	DefaultPushTimeout = 15 * time.Second
	// MaxPushTimeout caps PushConfig.Timeout.
	MaxPushTimeout = 60 * time.Second
	// PushSecretPrefix starts every push secret (Standard Webhooks).
	PushSecretPrefix = "whsec_"
	// maxPushURL bounds the endpoint URL's length.
	maxPushURL = 2048
	// maxDisabledReason bounds PushConfig.DisabledReason.
	maxDisabledReason = 512
	// pushSecretBytes is the size of a generated secret's key.
	pushSecretBytes = 32
)

// NormalizePush validates g.Push (nil is fine: no endpoint) and fills in
// its defaults: mode "json", MaxConcurrency 8, Timeout 15 s. A push
// config without a secret keeps prev's (the group's current endpoint, nil
// when there is none) or gets a new random one; generated reports the
// latter, so the caller can return the new secret once. An enabled
// endpoint has no DisabledReason.
func NormalizePush(g *GroupConfig, prev *PushConfig) (generated bool, err error) {
	if g.Push == nil {
		return false, nil
	}
	p := *g.Push // never modify the caller's (possibly shared) value
	if g.ConsumeMode == "broadcasting" {
		return false, fmt.Errorf("%w: push needs a clustering group (a broadcasting group's consumers keep their own offsets)", ErrInvalidArgument)
	}
	if err := validatePushURL(p.URL); err != nil {
		return false, err
	}
	switch p.Mode {
	case "":
		p.Mode = "json"
	case "json", "binary":
	default:
		return false, fmt.Errorf("%w: push mode %s must be json or binary", ErrInvalidArgument, QuoteValue(p.Mode))
	}
	if p.MaxConcurrency == 0 {
		p.MaxConcurrency = DefaultPushConcurrency
	}
	if p.MaxConcurrency < 1 || p.MaxConcurrency > MaxPushConcurrency {
		return false, fmt.Errorf("%w: push maxConcurrency %d must be 1..%d", ErrInvalidArgument, p.MaxConcurrency, MaxPushConcurrency)
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultPushTimeout
	}
	if p.Timeout < time.Millisecond || p.Timeout > MaxPushTimeout {
		return false, fmt.Errorf("%w: push timeout %v must be 1ms..%v", ErrInvalidArgument, p.Timeout, MaxPushTimeout)
	}
	switch {
	case p.Secret != "":
		if _, err := PushSecretKey(p.Secret); err != nil {
			return false, err
		}
	case prev != nil && prev.Secret != "":
		p.Secret = prev.Secret
	default:
		key := make([]byte, pushSecretBytes)
		if _, err := rand.Read(key); err != nil {
			return false, fmt.Errorf("generate push secret: %w", err)
		}
		p.Secret, generated = PushSecretPrefix+base64.StdEncoding.EncodeToString(key), true
	}
	if !p.Disabled {
		p.DisabledReason = ""
	}
	if len(p.DisabledReason) > maxDisabledReason {
		p.DisabledReason = p.DisabledReason[:maxDisabledReason]
	}
	g.Push = &p
	return generated, nil
}

// PushSecretKey decodes a "whsec_<base64>" secret into its HMAC key (24
// to 64 bytes).
func PushSecretKey(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, PushSecretPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: push secret must start with %q", ErrInvalidArgument, PushSecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, fmt.Errorf("%w: push secret: the part after %q must be standard base64", ErrInvalidArgument, PushSecretPrefix)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("%w: push secret must encode 24 to 64 bytes, not %d", ErrInvalidArgument, len(key))
	}
	return key, nil
}

// validatePushURL accepts absolute http and https URLs with a host and no
// user info or fragment. Where the host may point is checked at delivery
// time (package push), after name resolution.
func validatePushURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("%w: push url is required", ErrInvalidArgument)
	}
	if len(raw) > maxPushURL {
		return fmt.Errorf("%w: push url longer than %d bytes", ErrInvalidArgument, maxPushURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return fmt.Errorf("%w: push url: %w", ErrInvalidArgument, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: push url %s must be http or https", ErrInvalidArgument, QuoteValue(raw))
	case u.Hostname() == "":
		return fmt.Errorf("%w: push url %s has no host", ErrInvalidArgument, QuoteValue(raw))
	case u.User != nil:
		return fmt.Errorf("%w: push url must not carry user info (it would be shown by GET); receivers check the signature", ErrInvalidArgument)
	case u.Fragment != "":
		return fmt.Errorf("%w: push url must not have a fragment", ErrInvalidArgument)
	}
	return nil
}
