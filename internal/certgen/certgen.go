// Package certgen makes the certificates of a snowflaked deployment: a CA
// (ECDSA P-256), node certificates good for serving and for presenting to
// peers (serverAuth and clientAuth, DNS and IP SANs), client certificates
// named for the allow-lists, and ZooKeeper's PEM key store (the PKCS #8 key
// then the certificate, in one file). snowflakectl cert writes them to
// files (WriteFiles: atomically, keys 0600, never over a file unless told);
// the tests' throwaway PKI (internal/tlsfiles/tlstest) makes its
// certificates here too.
package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"regexp"
	"strings"
	"time"
)

// Backdate is how long before now a certificate becomes valid: a machine
// whose clock is a little behind the issuer's accepts it at once.
const Backdate = time.Hour

// Authority is a CA: its certificate and its signing key.
type Authority struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
}

// KeyPEM is the CA's private key, PEM ("PRIVATE KEY", PKCS #8).
func (a *Authority) KeyPEM() ([]byte, error) { return keyPEM(a.Key) }

// Pool returns a pool holding the CA.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.Cert)
	return p
}

// NewCA returns a new self-signed CA named name, valid for lifetime.
func NewCA(name string, lifetime time.Duration) (*Authority, error) {
	if name == "" {
		return nil, errors.New("a CA needs a name")
	}
	if lifetime <= 0 {
		return nil, fmt.Errorf("lifetime %s: must be positive", lifetime)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(lifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, Key: key, CertPEM: certPEM(der)}, nil
}

// LoadCA reads a CA written by NewCA (or any CA with an ECDSA key): its
// certificate and key files, PEM. Errors name the file.
func LoadCA(certFile, keyFile string) (*Authority, error) {
	cb, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(cb)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM CERTIFICATE in it", certFile)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certFile, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s: %q is not a CA certificate", certFile, cert.Subject.CommonName)
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(kb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s is not the key of %s", keyFile, certFile)
	}
	return &Authority{Cert: cert, Key: key, CertPEM: certPEM(blk.Bytes)}, nil
}

// Request is what a certificate to issue says.
type Request struct {
	// CommonName is the subject's common name (what an allow-list names).
	CommonName string
	// Hosts are the names and addresses the certificate is good for: IP
	// addresses become IP SANs, the others DNS SANs.
	Hosts []string
	// Server and Client are the extended key usages serverAuth and
	// clientAuth. A node needs both: it serves, and it presents the same
	// certificate to its peers (the peer clock check) and to ZooKeeper.
	Server, Client bool
	// Lifetime is how long it is valid from now.
	Lifetime time.Duration
}

// Leaf is a certificate a CA issued, with its key.
type Leaf struct {
	Cert *x509.Certificate
	// CertPEM is the certificate ("CERTIFICATE"); KeyPEM its key ("PRIVATE
	// KEY", PKCS #8).
	CertPEM, KeyPEM []byte
}

// ZooKeeperKeyStore is the PEM key store ZooKeeper (3.5 and later,
// ssl.keyStore.type=PEM) reads: the PKCS #8 private key, then the
// certificate.
func (l *Leaf) ZooKeeperKeyStore() []byte {
	return append(append([]byte{}, l.KeyPEM...), l.CertPEM...)
}

// dnsNameRE is what a DNS SAN may be: letters, digits, '-', '.', and a
// leading "*." wildcard.
var dnsNameRE = regexp.MustCompile(`^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$`)

// ValidDNSName reports whether s can be a DNS SAN.
func ValidDNSName(s string) bool { return len(s) <= 253 && dnsNameRE.MatchString(s) }

// Issue signs a certificate for r with a new ECDSA P-256 key.
func (a *Authority) Issue(r Request) (*Leaf, error) {
	if r.CommonName == "" {
		return nil, errors.New("a certificate needs a name (common name)")
	}
	if !r.Server && !r.Client {
		return nil, errors.New("a certificate needs a usage: server, client or both")
	}
	if r.Lifetime <= 0 {
		return nil, fmt.Errorf("lifetime %s: must be positive", r.Lifetime)
	}
	tmpl := &x509.Certificate{
		Subject:  pkix.Name{CommonName: r.CommonName},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	for _, h := range r.Hosts {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(strings.Trim(h, "[]")); {
		case h == "":
			return nil, errors.New("an empty host in the list")
		case ip != nil:
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		case ValidDNSName(h):
			tmpl.DNSNames = append(tmpl.DNSNames, strings.TrimSuffix(h, "."))
		default:
			return nil, fmt.Errorf("host %q is neither an IP address nor a DNS name", h)
		}
	}
	if r.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if r.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-Backdate), now.Add(r.Lifetime)
	if tmpl.NotAfter.After(a.Cert.NotAfter) {
		tmpl.NotAfter = a.Cert.NotAfter // never outlive the CA
	}
	var err error
	if tmpl.SerialNumber, err = newSerial(); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.Key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &Leaf{Cert: cert, CertPEM: certPEM(der), KeyPEM: kp}, nil
}

func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseKey reads an ECDSA private key, PKCS #8 or SEC 1 ("EC PRIVATE KEY").
func parseKey(b []byte) (*ecdsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM private key in it")
	}
	switch blk.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(blk.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, err
		}
		if ec, ok := k.(*ecdsa.PrivateKey); ok {
			return ec, nil
		}
		return nil, fmt.Errorf("a %T key: want ECDSA", k)
	}
	return nil, fmt.Errorf("PEM %q: want PRIVATE KEY", blk.Type)
}

// ZooCfg returns the zoo.cfg lines of a TLS client port on port that use
// keyStore (ZooKeeperKeyStore written to a file) and trustStore (the CA's
// certificate): PEM stores, the Netty connection factory TLS needs, and
// ssl.clientAuth=need (mutual TLS). Paths should be absolute.
func ZooCfg(port int, keyStore, trustStore string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "secureClientPort=%d\n", port)
	b.WriteString("serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n")
	fmt.Fprintf(&b, "ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n", keyStore)
	fmt.Fprintf(&b, "ssl.trustStore.location=%s\nssl.trustStore.type=PEM\n", trustStore)
	b.WriteString("ssl.clientAuth=need\n")
	return b.String()
}
