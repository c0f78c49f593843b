// Package zktls is ZooKeeper over TLS for snowflaked's ZooKeeper clients:
// the TLS settings loaded from PEM files (Load) and the dial function that
// go-zookeeper's zk.WithDialer takes (Dialer). The server, snowflakectl and
// the client's zkdiscovery all dial through it. It needs the standard
// library and client/tlspem only.
//
// A CA alone is server-verified TLS: the server's certificate must chain to
// the CA and name the host dialed (an IP address in the certificate's IP
// SANs, a name in its DNS SANs). A client certificate and key besides make
// it mutual TLS, for a server that requires one (ssl.clientAuth=need).
package zktls

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/tlspem"
)

// Errors Load wraps, one per file, so that a caller can name its own flag
// or field.
var (
	// ErrCA: the CA file cannot be read or holds no PEM certificate.
	ErrCA = errors.New("ZooKeeper TLS CA")
	// ErrCert: the client certificate is missing its key, or cannot be
	// read or parsed.
	ErrCert = errors.New("ZooKeeper TLS client certificate")
	// ErrKey: the client key is missing its certificate, cannot be read or
	// parsed, or does not go with the certificate.
	ErrKey = errors.New("ZooKeeper TLS client key")
)

// Files names the PEM files of a TLS connection to ZooKeeper.
type Files struct {
	CA   string // certificates the server's must chain to (required)
	Cert string // client certificate (with Key: mutual TLS)
	Key  string // the client certificate's private key
}

// Enabled reports whether any file is set: the connection is to be TLS.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// Load reads the files into a TLS client configuration (TLS 1.2 or later)
// through tlspem. A Files without any file gives nil and no error (plain
// TCP). Each error wraps ErrCA, ErrCert or ErrKey for the file at fault,
// and a *tlspem.FileError when a file could not be used.
func Load(f Files) (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	switch {
	case f.CA == "":
		return nil, fmt.Errorf("%w: a CA file is required for TLS (the certificates the server's must chain to)", ErrCA)
	case f.Cert != "" && f.Key == "":
		return nil, fmt.Errorf("%w: %s has no key: give the key file too", ErrCert, f.Cert)
	case f.Key != "" && f.Cert == "":
		return nil, fmt.Errorf("%w: %s has no certificate: give the certificate file too", ErrKey, f.Key)
	}
	pool, err := tlspem.CA(f.CA)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCA, err)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if f.Cert == "" {
		return cfg, nil
	}
	pair, err := tlspem.Pair(f.Cert, f.Key)
	if err != nil {
		var fe *tlspem.FileError
		if errors.As(err, &fe) && fe.Role == tlspem.RoleKey {
			return nil, fmt.Errorf("%w: %w", ErrKey, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrCert, err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}

// DialFunc is the dial function go-zookeeper's zk.WithDialer takes.
type DialFunc = func(network, address string, timeout time.Duration) (net.Conn, error)

// Dialer returns a DialFunc that opens TLS connections with cfg: the TCP
// connection and the handshake together within the timeout, the server
// verified against cfg's RootCAs and the host part of the address (unless
// cfg sets ServerName). A failed handshake's error says so and names the
// address, e.g. "TLS handshake with ZooKeeper 127.0.0.1:2182: tls: failed
// to verify certificate: x509: certificate signed by unknown authority".
func Dialer(cfg *tls.Config) DialFunc {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c := cfg.Clone()
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return nil, fmt.Errorf("ZooKeeper address %q: %w", address, err)
			}
			c.ServerName = host
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, c)
		if err != nil {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				return nil, err // no TCP connection: not TLS's doing
			}
			return nil, fmt.Errorf("TLS handshake with ZooKeeper %s: %w", address, err)
		}
		return conn, nil
	}
}
