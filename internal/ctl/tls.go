package ctl

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles"
)

// tlsFlags are the flags of the commands that talk to nodes over HTTP:
// probe, get, bench and status (its /readyz requests).
type tlsFlags struct{ ca, cert, key string }

// register defines --tls-ca, --tls-cert and --tls-key (also
// SNOWFLAKED_TLS_CA, SNOWFLAKED_TLS_CERT, SNOWFLAKED_TLS_KEY).
func (f *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ca, "tls-ca", "", "PEM CA bundle that verifies the nodes' certificates (HTTPS; default the system's roots)")
	fs.StringVar(&f.cert, "tls-cert", "", "PEM client certificate for nodes that require one (--tls-client-ca); with --tls-key")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of --tls-cert")
}

// on reports whether any TLS flag is set: the nodes speak HTTPS.
func (f *tlsFlags) on() bool { return f.ca != "" || f.cert != "" || f.key != "" }

// config returns the client TLS configuration of the flags, nil when none
// is set; errors name the flag and the file.
func (f *tlsFlags) config() (*tls.Config, error) {
	if !f.on() {
		return nil, nil
	}
	if (f.cert == "") != (f.key == "") {
		return nil, errors.New("--tls-cert and --tls-key go together: give both or neither")
	}
	cfg := &tls.Config{MinVersion: tlsfiles.MinVersion}
	if f.ca != "" {
		pool, err := tlsfiles.LoadCA(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		cfg.RootCAs = pool
	}
	if f.cert != "" {
		pair, err := tlsfiles.LoadPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{*pair}
	}
	return cfg, nil
}
