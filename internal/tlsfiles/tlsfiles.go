// Package tlsfiles turns the TLS flags of snowflaked and snowflakectl into
// tls.Configs: a certificate and key read from files and read again when
// the files change (a rotation needs no restart), a CA bundle, allow-lists
// of client names, and a listener that counts failed handshakes by reason.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/client/tlspem"
)

// ErrFile is wrapped by every error about a certificate, key or CA file:
// unreadable, not PEM, or a key that does not match its certificate.
var ErrFile = errors.New("bad TLS file")

// MinVersion is the oldest TLS version served and dialed.
const MinVersion = tls.VersionTLS12

// reloadEvery is how often, at most, a Pair looks at its files' size and
// modification time.
const reloadEvery = time.Second

// LoadPair reads a certificate (chain) and its private key, PEM encoded;
// the error wraps ErrFile and names the file at fault (tlspem.Pair).
func LoadPair(certFile, keyFile string) (*tls.Certificate, error) {
	pair, err := tlspem.Pair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	return &pair, nil
}

// LoadCA reads a bundle of PEM CA certificates; the error wraps ErrFile and
// names the file (tlspem.CA).
func LoadCA(file string) (*x509.CertPool, error) {
	pool, err := tlspem.CA(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	return pool, nil
}

// stamp is what says a file changed: its size and modification time.
type stamp struct {
	certSize, keySize int64
	certMod, keyMod   time.Time
}

func statPair(certFile, keyFile string) (stamp, error) {
	c, err := os.Stat(certFile)
	if err != nil {
		return stamp{}, err
	}
	k, err := os.Stat(keyFile)
	if err != nil {
		return stamp{}, err
	}
	return stamp{certSize: c.Size(), keySize: k.Size(), certMod: c.ModTime(), keyMod: k.ModTime()}, nil
}

// Pair is a certificate and key kept in step with their files: every
// handshake asks it for the certificate, and at most once a second it
// looks at the files' size and modification time; when they changed it
// reads them again. A new pair that does not load (half written, a key
// that does not match) is logged and the old one stays in use until the
// files change again. Safe for concurrent use.
type Pair struct {
	certFile, keyFile string
	log               zerolog.Logger
	now               func() time.Time

	cur     atomic.Pointer[tls.Certificate]
	next    atomic.Int64 // unix ns: the files are not looked at before
	mu      sync.Mutex   // one look at a time
	seen    stamp        // the files' stamp when last read (loaded or not)
	reloads atomic.Uint64
}

// NewPair loads the pair once (an error wraps ErrFile and names the file)
// and returns it.
func NewPair(certFile, keyFile string, log zerolog.Logger) (*Pair, error) {
	st, err := statPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFile, err)
	}
	cert, err := LoadPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	p := &Pair{certFile: certFile, keyFile: keyFile, log: log, now: time.Now, seen: st}
	p.cur.Store(cert)
	p.next.Store(p.now().Add(reloadEvery).UnixNano())
	return p, nil
}

// Certificate returns the pair in use, reading the files again first when
// they changed (see Pair).
func (p *Pair) Certificate() *tls.Certificate {
	if now := p.now(); now.UnixNano() >= p.next.Load() && p.mu.TryLock() {
		p.next.Store(now.Add(reloadEvery).UnixNano())
		p.refresh()
		p.mu.Unlock()
	}
	return p.cur.Load()
}

// Reloads counts the times new files were loaded since NewPair.
func (p *Pair) Reloads() uint64 { return p.reloads.Load() }

// refresh reads the files again if their stamp changed; p.mu held.
func (p *Pair) refresh() {
	st, err := statPair(p.certFile, p.keyFile)
	if err != nil {
		if p.seen != (stamp{}) {
			p.log.Error().Err(err).Msg("TLS certificate files: cannot read them; serving the certificate loaded before")
		}
		p.seen = stamp{}
		return
	}
	if st == p.seen {
		return
	}
	p.seen = st
	cert, err := LoadPair(p.certFile, p.keyFile)
	if err != nil {
		p.log.Error().Err(err).Msg("TLS certificate files changed but do not load; serving the certificate loaded before")
		return
	}
	p.cur.Store(cert)
	p.reloads.Add(1)
	ev := p.log.Info().Str("cert", p.certFile)
	if cert.Leaf != nil {
		ev = ev.Str("subject", cert.Leaf.Subject.String()).Time("not_after", cert.Leaf.NotAfter)
	}
	ev.Msg("TLS certificate reloaded")
}

// GetCertificate is tls.Config.GetCertificate: the pair in use.
func (p *Pair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// GetClientCertificate is tls.Config.GetClientCertificate: the pair in use,
// presented as a client certificate.
func (p *Pair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return p.Certificate(), nil
}

// ServerConfig returns the configuration of a server presenting pair;
// with clientCAs set, every client must present a certificate that one of
// them signed (mutual TLS).
func ServerConfig(pair *Pair, clientCAs *x509.CertPool) *tls.Config {
	cfg := &tls.Config{MinVersion: MinVersion, GetCertificate: pair.GetCertificate}
	if clientCAs != nil {
		cfg.ClientCAs = clientCAs
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg
}

// ClientConfig returns the configuration of a client that verifies servers
// with roots (nil: the system's roots) and presents pair when a server
// asks for a certificate (nil: none).
func ClientConfig(roots *x509.CertPool, pair *Pair) *tls.Config {
	cfg := &tls.Config{MinVersion: MinVersion, RootCAs: roots}
	if pair != nil {
		cfg.GetClientCertificate = pair.GetClientCertificate
	}
	return cfg
}

// AllowList is a list of client names; a client certificate is allowed
// when its subject's common name or one of its DNS names is in it. The
// empty list allows every client.
type AllowList []string

// ParseAllowList splits a comma-separated list; an empty entry is an
// error.
func ParseAllowList(s string) (AllowList, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out AllowList
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("empty name in the list %q", s)
		}
		out = append(out, name)
	}
	return out, nil
}

// Allows reports whether the client certificate cert may pass (always,
// for the empty list; never for a nil cert otherwise).
func (a AllowList) Allows(cert *x509.Certificate) bool {
	if len(a) == 0 {
		return true
	}
	if cert == nil {
		return false
	}
	for _, name := range a {
		if cert.Subject.CommonName == name {
			return true
		}
		for _, dns := range cert.DNSNames {
			if dns == name {
				return true
			}
		}
	}
	return false
}

// Name is how logs and errors name a client certificate: its common
// name, else its first DNS name.
func Name(cert *x509.Certificate) string {
	switch {
	case cert == nil:
		return "(no certificate)"
	case cert.Subject.CommonName != "":
		return cert.Subject.CommonName
	case len(cert.DNSNames) > 0:
		return cert.DNSNames[0]
	}
	return "(no name)"
}
