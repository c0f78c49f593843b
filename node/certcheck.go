package node

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
)

// certFix is what the start-time certificate errors tell the operator to
// run: a node certificate with both usages and the advertised host.
const certFix = "snowflakectl cert create-node --dir DIR --hosts HOST,… makes one (docs/security.md)"

// peerCertificate refuses, in ZooKeeper mode, a --tls-cert its peers would
// reject: the node serves its peers with it (they verify serverAuth and
// that it names the address the node advertises) and presents it to them
// as a client certificate (with --tls-client-ca they require clientAuth).
// Without this check such a node starts and serves, and only its peer
// clock check dies (GET /time: EOF). A standalone node has no peers;
// tlsFlags reports a file that does not load.
func (v *validation) peerCertificate() {
	c := v.c
	if c.standalone() || c.TLSCert == "" || c.TLSKey == "" {
		return
	}
	cert, err := firstCertificate(c.TLSCert)
	if err != nil {
		return
	}
	if !hasUsage(cert, x509.ExtKeyUsageServerAuth) {
		v.bad("--tls-cert %s: the certificate has no serverAuth extended key usage: peers and clients refuse it; %s", c.TLSCert, certFix)
	}
	if c.TLSClientCA != "" && !hasUsage(cert, x509.ExtKeyUsageClientAuth) {
		v.bad("--tls-cert %s: the certificate has no clientAuth extended key usage: the node presents it to its peers, which require client certificates (--tls-client-ca), so its peer clock check would fail (GET /time: EOF); %s", c.TLSCert, certFix)
	}
	flag, addr := "--advertise", c.Advertise
	if addr == "" {
		flag, addr = "--listen", c.Listen
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !concreteHost(addr) {
		return // addresses and zooKeeper report it
	}
	if err := cert.VerifyHostname(host); err != nil {
		v.bad("--tls-cert %s: the certificate does not name %s, the host the node advertises (%s %s), so its peers refuse it; it names %s; %s", c.TLSCert, host, flag, addr, sanList(cert), certFix)
	}
}

// firstCertificate parses the first certificate of a PEM file (the leaf of
// a chain).
func firstCertificate(file string) (*x509.Certificate, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			return nil, fmt.Errorf("%s: no PEM certificate", file)
		}
		if blk.Type == "CERTIFICATE" {
			return x509.ParseCertificate(blk.Bytes)
		}
	}
}

// hasUsage reports whether a certificate may be used for u, as
// crypto/x509's verification decides: no extended key usage at all, or
// ExtKeyUsageAny, allows every usage.
func hasUsage(cert *x509.Certificate, u x509.ExtKeyUsage) bool {
	if len(cert.ExtKeyUsage) == 0 && len(cert.UnknownExtKeyUsage) == 0 {
		return true
	}
	return slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageAny) || slices.Contains(cert.ExtKeyUsage, u)
}

// sanList names a certificate's DNS and IP SANs ("no SAN" without any).
func sanList(cert *x509.Certificate) string {
	var names []string
	for _, d := range cert.DNSNames {
		names = append(names, "DNS:"+d)
	}
	for _, ip := range cert.IPAddresses {
		names = append(names, "IP:"+ip.String())
	}
	if len(names) == 0 {
		return "no SAN"
	}
	return strings.Join(names, ", ")
}
