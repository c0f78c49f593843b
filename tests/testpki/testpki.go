// Package testpki makes throwaway certificates for tests of TLS to
// ZooKeeper: a CA, a server certificate for 127.0.0.1 (IP SAN) and a client
// certificate signed by it, and a second CA that signed nothing of them,
// each written as PEM files in a t.TempDir(). Production code never
// imports it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
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

// New makes the certificates and writes them to a new t.TempDir(); it
// fails the test on any error.
func New(t testing.TB) PKI {
	t.Helper()
	dir := t.TempDir()
	p := PKI{Dir: dir}
	path := func(name string) string { return filepath.Join(dir, name) }
	caKey, caCert := makeCA(t, "snowflaked test CA")
	p.CA = writeCert(t, path("ca.pem"), caCert)
	_, otherCert := makeCA(t, "some other CA")
	p.OtherCA = writeCert(t, path("other-ca.pem"), otherCert)

	srvKey, srvCert := makeLeaf(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "zookeeper-test-server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	p.ServerCert = writeCert(t, path("server.pem"), srvCert)
	p.ServerKey = writeKey(t, path("server-key.pem"), srvKey)
	p.ServerKeyCert = path("server-keycert.pem")
	write(t, p.ServerKeyCert, append(keyPEM(t, srvKey), certPEM(srvCert)...))

	cliKey, cliCert := makeLeaf(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "snowflaked-test-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	p.ClientCert = writeCert(t, path("client.pem"), cliCert)
	p.ClientKey = writeKey(t, path("client-key.pem"), cliKey)
	return p
}

// serial makes every certificate's serial number distinct.
var serial atomic.Int64

func nextSerial() *big.Int { return big.NewInt(time.Now().UnixNano() + serial.Add(1)) }

func makeCA(t testing.TB, name string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testpki: CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testpki: CA: %v", err)
	}
	return key, cert
}

func makeLeaf(t testing.TB, caKey *ecdsa.PrivateKey, ca *x509.Certificate, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = nextSerial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatalf("testpki: %s: %v", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testpki: %s: %v", tmpl.Subject.CommonName, err)
	}
	return key, cert
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testpki: key: %v", err)
	}
	return key
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// keyPEM is PKCS #8 ("PRIVATE KEY"): what Go and ZooKeeper's PEM keystore
// both read.
func keyPEM(t testing.TB, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatalf("testpki: key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func writeCert(t testing.TB, path string, c *x509.Certificate) string {
	t.Helper()
	write(t, path, certPEM(c))
	return path
}

func writeKey(t testing.TB, path string, k *ecdsa.PrivateKey) string {
	t.Helper()
	write(t, path, keyPEM(t, k))
	return path
}

func write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatalf("testpki: %v", err)
	}
}
