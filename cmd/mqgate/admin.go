package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	mqgate "github.com/mqgate/mqgate/clients/go"
)

// The admin subcommands (topic, group, msg, dlq, timer, broker) are
// mqadmin's equivalents over HTTP, built only on the generated Go client
// (clients/go): the command line is itself a test of the SDK. Names are
// positional, everything else is a flag named after the API field.

// adminFlags are the flags of every admin subcommand: where the server is,
// the credentials, the output. Each command family embeds them, so they go
// anywhere after the family's name (`mqgate topic list -o json`).
type adminFlags struct {
	Server             string        `help:"Base URL of the mqgate server." env:"MQGATE_SERVER,MQGATE_URL" default:"http://127.0.0.1:8080"`
	User               string        `help:"HTTP Basic user (the ACL file's accessKey)." env:"MQGATE_USER"`
	Password           string        `help:"HTTP Basic password (the secretKey); prefer the environment to the command line." env:"MQGATE_PASSWORD"`
	Token              string        `help:"Bearer token (a JWT the server's --jwt-secret or --jwt-jwks-url verifies)." env:"MQGATE_TOKEN"`
	CAFile             string        `name:"ca-file" help:"PEM bundle of the CA that signed the server's certificate (https)." env:"MQGATE_CA_FILE" type:"existingfile"`
	InsecureSkipVerify bool          `help:"Do not verify the server's TLS certificate." env:"MQGATE_INSECURE_SKIP_VERIFY"`
	Timeout            time.Duration `help:"Give up on a request after this long (a pull's --wait-ms is added)." default:"30s"`
	Output             string        `short:"o" help:"Output: an aligned table, JSON (the API's own) or YAML." enum:"table,json,yaml" default:"table"`
}

// admin is what a subcommand runs with: the client and the printer.
type admin struct {
	c       *mqgate.ClientWithResponses
	server  string // --server
	out     *printer
	timeout time.Duration
}

// ProvideAdmin builds the client of the flags (kong calls it for the Run
// methods below the family that embeds the flags).
func (f *adminFlags) ProvideAdmin() (*admin, error) {
	if f.User != "" && f.Token != "" {
		return nil, errors.New("--user and --token exclude each other")
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if f.CAFile != "" || f.InsecureSkipVerify {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.InsecureSkipVerify}
		if f.CAFile != "" {
			pem, err := os.ReadFile(f.CAFile)
			if err != nil {
				return nil, err
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", f.CAFile)
			}
		}
		transport.TLSClientConfig = cfg
	}
	opts := []mqgate.ClientOption{mqgate.WithHTTPClient(&http.Client{Transport: transport})}
	switch {
	case f.User != "":
		opts = append(opts, mqgate.WithBasicAuth(f.User, f.Password))
	case f.Token != "":
		opts = append(opts, mqgate.WithBearerToken(f.Token))
	}
	opts = append(opts, mqgate.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("User-Agent", "mqgate-cli/"+version)
		return nil
	}))
	c, err := mqgate.New(f.Server, opts...)
	if err != nil {
		return nil, err
	}
	return &admin{c: c, server: f.Server, out: &printer{format: f.Output, w: os.Stdout}, timeout: f.Timeout}, nil
}

// ctx bounds one request by the --timeout, plus extra (a long poll's wait).
func (a *admin) ctx(parent context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, a.timeout+extra)
}

// cliError is an API error as the command line reports it: the problem's
// detail, then its status and code.
type cliError struct{ e *mqgate.Error }

func (c cliError) Error() string {
	what := c.e.Detail
	if what == "" {
		what = c.e.Problem.Title
	}
	if what == "" {
		what = strings.TrimSpace(string(c.e.Body))
	}
	if what == "" {
		what = http.StatusText(c.e.Status)
	}
	code := c.e.Code
	if code == "" {
		code = strings.ToLower(strings.ReplaceAll(http.StatusText(c.e.Status), " ", "-"))
	}
	s := fmt.Sprintf("%s (%d %s)", what, c.e.Status, code)
	if f := c.e.Problem.Field; f != nil && *f != "" {
		s += ", field " + *f
	}
	return s
}

func (c cliError) Unwrap() error { return c.e }

// apiCall checks a generated call's answer: an API error becomes a cliError.
func apiCall[R mqgate.Response](resp R, err error) (R, error) {
	resp, err = mqgate.Check(resp, err)
	var e *mqgate.Error
	if errors.As(err, &e) {
		return resp, cliError{e}
	}
	return resp, err
}

// readArg returns s, or the contents of the file s names after @ (@- is
// standard input), as curl's -d does.
func readArg(s string) ([]byte, error) {
	name, ok := strings.CutPrefix(s, "@")
	if !ok {
		return []byte(s), nil
	}
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}
