package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
)

// HealthCheck GETs /livez of the server listening on listen (the --listen
// value; an empty or unspecified host means the loopback address) and
// returns nil on 200. It is the Docker HEALTHCHECK (mqgate healthcheck),
// which must not need curl in a distroless image.
func HealthCheck(ctx context.Context, listen string) error {
	return HealthCheckTLS(ctx, listen, "")
}

// HealthCheckTLS is HealthCheck of a server with TLS when certFile (its
// --tls-cert-file) is not empty: it speaks https and accepts exactly the
// certificates of that file, whatever names they carry (the probe dials
// a loopback address the certificate need not name).
func HealthCheckTLS(ctx context.Context, listen, certFile string) error {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("healthcheck: listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	scheme, client := "http", http.DefaultClient
	if certFile != "" {
		pinned, err := pinnedTLS(certFile)
		if err != nil {
			return fmt.Errorf("healthcheck: %w", err)
		}
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.TLSClientConfig = pinned
		defer transport.CloseIdleConnections()
		scheme, client = "https", &http.Client{Transport: transport}
	}
	url := scheme + "://" + net.JoinHostPort(host, port) + "/livez"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %s", ErrUnhealthy, url, resp.Status)
	}
	return nil
}

// pinnedTLS is a client configuration that accepts a server whose leaf
// certificate is one of the certificates of certFile.
func pinnedTLS(certFile string) (*tls.Config, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	var pinned [][]byte
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			pinned = append(pinned, block.Bytes)
		}
	}
	if len(pinned) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", certFile)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is not verified against roots: the certificate is
		// compared with the file's instead (pinning).
		InsecureSkipVerify: true, //nolint:gosec // pinned below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) > 0 {
				for _, p := range pinned {
					if bytes.Equal(p, cs.PeerCertificates[0].Raw) {
						return nil
					}
				}
			}
			return fmt.Errorf("the server's certificate is not the one in %s", certFile)
		},
	}, nil
}
