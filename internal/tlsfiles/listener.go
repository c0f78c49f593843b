package tlsfiles

import (
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

// Reasons a handshake failed: the reason label of
// snowflaked_tls_handshake_failures_total.
const (
	// ReasonNotTLS: the client spoke something else first (plain HTTP on
	// the HTTPS port).
	ReasonNotTLS = "not_tls"
	// ReasonNoClientCert: mutual TLS, and the client presented no
	// certificate.
	ReasonNoClientCert = "no_client_cert"
	// ReasonBadClientCert: the client's certificate did not verify
	// (another CA, expired, not for client authentication).
	ReasonBadClientCert = "bad_client_cert"
	// ReasonOther: anything else (the client went away, no common
	// version or cipher, a timeout).
	ReasonOther = "other"
)

// Reasons lists every reason, in the order metrics export them.
var Reasons = []string{ReasonNotTLS, ReasonNoClientCert, ReasonBadClientCert, ReasonOther}

// reasonOf classifies a failed handshake.
func reasonOf(err error) string {
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(err, &rh):
		return ReasonNotTLS
	case errors.As(err, &cv):
		return ReasonBadClientCert
	case strings.Contains(err.Error(), "didn't provide a certificate"):
		return ReasonNoClientCert
	}
	return ReasonOther
}

// Failures counts failed handshakes by reason. The zero value is ready.
type Failures struct{ n [4]atomic.Uint64 }

func (f *Failures) add(reason string) {
	for i, r := range Reasons {
		if r == reason {
			f.n[i].Add(1)
			return
		}
	}
}

// Counts returns the count of each reason, in the order of Reasons.
func (f *Failures) Counts() []uint64 {
	out := make([]uint64, len(Reasons))
	for i := range out {
		out[i] = f.n[i].Load()
	}
	return out
}

// NewListener returns a listener serving TLS with cfg on the connections
// ln accepts, counting each failed handshake in fails (may be nil). The
// handshake runs on the connection's first read or write, on the server's
// goroutine for it (under its read deadline), never in Accept.
func NewListener(ln net.Listener, cfg *tls.Config, fails *Failures) net.Listener {
	if fails == nil {
		fails = &Failures{}
	}
	return &listener{Listener: ln, cfg: cfg, fails: fails}
}

type listener struct {
	net.Listener
	cfg   *tls.Config
	fails *Failures
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{Conn: tls.Server(c, l.cfg), fails: l.fails}, nil
}

// conn is a server-side TLS connection that counts its failed handshake.
type conn struct {
	*tls.Conn
	fails *Failures
	once  sync.Once
	err   error
}

func (c *conn) handshake() error {
	c.once.Do(func() {
		if c.err = c.Conn.Handshake(); c.err != nil {
			c.fails.add(reasonOf(c.err))
		}
	})
	return c.err
}

// Handshake runs the handshake once; later calls return its error.
func (c *conn) Handshake() error { return c.handshake() }

func (c *conn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *conn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
