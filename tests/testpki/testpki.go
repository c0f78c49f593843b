// Package testpki lays out the throwaway certificates of tests of TLS to
// ZooKeeper as files: a CA, a server certificate for 127.0.0.1 (IP SAN)
// and a client certificate signed by it, and a second CA that signed
// nothing of them, each PEM in a t.TempDir(). The certificates come from
// internal/tlsfiles/tlstest, the one test PKI, which makes them with
// internal/certgen (snowflakectl cert's); the key store is certgen's too. Production code never
// imports it.
package testpki

import (
	"os"
	"path/filepath"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles/tlstest"
)

// PKI is the files one New writes (PEM each).
type PKI struct {
	Dir string
	// CA is the certificate of the CA that signed the others.
	CA string
	// ServerCert and ServerKey are the server's (IP SAN 127.0.0.1, DNS SAN
	// localhost); ServerKeyCert is key then certificate in one file (what a
	// PEM keystore of ZooKeeper reads).
	ServerCert, ServerKey, ServerKeyCert string
	// ClientCert and ClientKey are a client's (CN "snowflaked-test-client").
	ClientCert, ClientKey string
	// OtherCA is a CA that signed nothing here: trusting it alone must
	// fail verification.
	OtherCA string
}

// New makes the certificates and writes them; it fails the test on any
// error.
func New(t testing.TB) PKI {
	t.Helper()
	ca := tlstest.NewCA(t, "snowflaked test CA")
	other := tlstest.NewCA(t, "some other CA")
	srv := ca.Issue(t, "zookeeper-test-server")
	cli := ca.Issue(t, "snowflaked-test-client")
	p := PKI{Dir: t.TempDir(), CA: ca.File, OtherCA: other.File,
		ServerCert: srv.CertFile, ServerKey: srv.KeyFile, ClientCert: cli.CertFile, ClientKey: cli.KeyFile}
	p.ServerKeyCert = filepath.Join(p.Dir, "server-keycert.pem")
	if err := os.WriteFile(p.ServerKeyCert, srv.ZooKeeperKeyStore(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
