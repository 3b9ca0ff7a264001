package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/rs/zerolog"

	"github.com/mqgate/mqgate/server/auth"
)

// security is authentication as the server runs it: the ACL file and
// its poller, the JWT verifier and its key-set refresh, the guard the API
// asks, and their metrics. A nil *security is authentication off.
type security struct {
	file    *auth.File
	jwt     *auth.JWTVerifier // nil: bearer tokens refused
	guard   *auth.Guard
	metrics *auth.Metrics
}

// openSecurity loads cfg.ACLFile (nil, nil without one) and sets up JWT
// verification. Nothing runs in the background until start.
func openSecurity(ctx context.Context, cfg Config, log zerolog.Logger) (*security, error) {
	if cfg.ACLFile == "" {
		return nil, nil
	}
	s := &security{metrics: auth.NewMetrics()}
	var err error
	s.file, err = auth.OpenFile(cfg.ACLFile, auth.FileOptions{PollInterval: cfg.ACLPollInterval, Logger: log, Metrics: s.metrics})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %w: write or mount one (see the README's \"Authentication\"), or run without "+
			"authentication with an empty --acl-file (MQGATE_ACL_FILE=) and, off loopback, --insecure-no-auth", ErrInvalidConfig, err)
	case errors.Is(err, fs.ErrPermission):
		return nil, fmt.Errorf("%w: %w: the file must be readable by the user mqgate runs as (uid %d)", ErrInvalidConfig, err, os.Getuid())
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if cfg.JWTSecret != "" || cfg.JWTJWKSURL != "" {
		s.jwt, err = auth.NewJWTVerifier(ctx, auth.JWTOptions{
			Secret:       []byte(cfg.JWTSecret),
			JWKSURL:      cfg.JWTJWKSURL,
			Issuer:       cfg.JWTIssuer,
			Audience:     cfg.JWTAudience,
			AccountClaim: cfg.JWTAccountClaim,
			Logger:       log,
			Metrics:      s.metrics,
		})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	s.guard = auth.NewGuard(auth.Options{
		ACL:                s.file,
		JWT:                s.jwt,
		FailuresPerMinute:  cfg.AuthFailuresPerMinute,
		ClientCertificates: cfg.TLSClientCAFile != "",
		Metrics:            s.metrics,
		Logger:             log,
	})
	return s, nil
}

// start begins polling the ACL file and refreshing the key set.
func (s *security) start() {
	if s == nil {
		return
	}
	s.file.Start()
	if s.jwt != nil {
		s.jwt.Start()
	}
}

// stop ends them and waits; it is idempotent.
func (s *security) stop() {
	if s == nil {
		return
	}
	s.file.Stop()
	if s.jwt != nil {
		s.jwt.Stop()
	}
}

// degraded says why the newest ACL file or key set is not in force.
func (s *security) degraded() []string {
	if s == nil {
		return nil
	}
	return s.guard.Degraded()
}

// mode names the authentication in force, for the start-up log.
func (s *security) mode() string {
	switch {
	case s == nil:
		return "off"
	case s.jwt != nil:
		return "acl file, basic and bearer"
	}
	return "acl file, basic"
}
