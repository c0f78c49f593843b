package ctl

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"

	"codeberg.org/snowflaked/snowflaked/client/zktls"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// zkTLSFlags are --zk-tls-ca, --zk-tls-cert and --zk-tls-key, which every
// command that takes --zk has: ZooKeeper over TLS, as snowflaked's flags of
// the same names.
type zkTLSFlags struct{ ca, cert, key *string }

func addZKTLSFlags(fs *flag.FlagSet) zkTLSFlags {
	return zkTLSFlags{
		ca:   fs.String("zk-tls-ca", "", "PEM file of the CA ZooKeeper's certificate must chain to: talk to ZooKeeper over TLS (its secureClientPort)"),
		cert: fs.String("zk-tls-cert", "", "PEM client certificate for ZooKeeper over TLS, with --zk-tls-key: mutual TLS"),
		key:  fs.String("zk-tls-key", "", "PEM private key of --zk-tls-cert"),
	}
}

// config loads the files: nil without any of the flags (plain TCP); an
// error names the flag at fault.
func (f zkTLSFlags) config() (*tls.Config, error) {
	cfg, err := zktls.Load(zktls.Files{CA: *f.ca, Cert: *f.cert, Key: *f.key})
	switch {
	case errors.Is(err, zktls.ErrCA):
		return nil, fmt.Errorf("--zk-tls-ca %q: %w", *f.ca, err)
	case errors.Is(err, zktls.ErrCert):
		return nil, fmt.Errorf("--zk-tls-cert %q: %w", *f.cert, err)
	case errors.Is(err, zktls.ErrKey):
		return nil, fmt.Errorf("--zk-tls-key %q: %w", *f.key, err)
	}
	return cfg, err
}

// dialer is the zkconn.Dialer of the flags (nil without them: the
// default, plain TCP).
func (f zkTLSFlags) dialer() (zkconn.Dialer, error) {
	cfg, err := f.config()
	if err != nil || cfg == nil {
		return nil, err
	}
	return zkconn.TLSDial(cfg), nil
}

// adminOptions are the coordinator options of the flags.
func (f zkTLSFlags) adminOptions() ([]coordinator.AdminOption, error) {
	d, err := f.dialer()
	if err != nil || d == nil {
		return nil, err
	}
	return []coordinator.AdminOption{coordinator.WithAdminDial(d)}, nil
}
