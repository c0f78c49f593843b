// Package tlstest makes throwaway certificates for tests: a CA, and
// certificates it signs for 127.0.0.1 and localhost, written to a test's
// temporary directory. Nothing it makes is kept in the repository. The
// certificates come from internal/certgen, as snowflakectl cert's do.
package tlstest

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/certgen"
)

// CA is a certificate authority for one test.
type CA struct {
	Cert *x509.Certificate
	auth *certgen.Authority
	// PEM is the CA's certificate, PEM encoded.
	PEM []byte
	// File is PEM written to the test's temporary directory.
	File string
}

// lifetime is how long the certificates are valid (from an hour ago:
// certgen.Backdate).
const lifetime = 24 * time.Hour

// NewCA returns a new CA named name, its certificate written to a file in
// t.TempDir().
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	a, err := certgen.NewCA(name, lifetime)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: a.Cert, auth: a, PEM: a.CertPEM}
	ca.File = write(t, t.TempDir(), name+"-ca.pem", ca.PEM)
	return ca
}

// Pool returns a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool { return ca.auth.Pool() }

// Leaf is a certificate the CA signed, and its key.
type Leaf struct {
	CertPEM, KeyPEM []byte
	// CertFile and KeyFile are where Issue wrote them.
	CertFile, KeyFile string
}

// TLS returns the leaf as a tls.Certificate.
func (l Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Issue returns a certificate for common name cn, good for servers and
// clients alike, with the IP SAN 127.0.0.1 and the DNS SANs localhost and
// cn, written to files named after cn in a new temporary directory.
func (ca *CA) Issue(t testing.TB, cn string) Leaf {
	t.Helper()
	hosts := []string{"127.0.0.1", "localhost"}
	if certgen.ValidDNSName(cn) {
		hosts = append(hosts, cn)
	}
	return ca.IssueFor(t, certgen.Request{CommonName: cn, Hosts: hosts, Server: true, Client: true, Lifetime: lifetime})
}

// IssueFor returns a certificate for r, written to files named after its
// common name in a new temporary directory.
func (ca *CA) IssueFor(t testing.TB, r certgen.Request) Leaf {
	t.Helper()
	leaf, err := ca.auth.Issue(r)
	if err != nil {
		t.Fatal(err)
	}
	l := Leaf{CertPEM: leaf.CertPEM, KeyPEM: leaf.KeyPEM}
	dir := t.TempDir()
	l.CertFile = write(t, dir, r.CommonName+".crt", l.CertPEM)
	l.KeyFile = write(t, dir, r.CommonName+".key", l.KeyPEM)
	return l
}

// ZooKeeperKeyStore is the leaf as ZooKeeper's PEM key store reads it
// (certgen.Leaf.ZooKeeperKeyStore).
func (l Leaf) ZooKeeperKeyStore() []byte {
	return (&certgen.Leaf{CertPEM: l.CertPEM, KeyPEM: l.KeyPEM}).ZooKeeperKeyStore()
}

// Install writes l over certFile and keyFile, each to a temporary name
// first and renamed into place (a rotation as an operator does it).
func Install(t testing.TB, l Leaf, certFile, keyFile string) {
	t.Helper()
	for _, f := range []struct {
		path string
		b    []byte
	}{{certFile, l.CertPEM}, {keyFile, l.KeyPEM}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
}

func write(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
