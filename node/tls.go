package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles"
)

// nodeTLS is the node's TLS (--tls-cert and the flags beside it): what its
// listener serves, what its peer requests dial with, the allow-lists of
// client names and the count of failed handshakes.
type nodeTLS struct {
	server *tls.Config
	peers  *tls.Config
	api    tlsfiles.AllowList // --tls-client-allow
	admin  tlsfiles.AllowList // --tls-admin-allow, else --tls-client-allow
	fails  tlsfiles.Failures
}

// newNodeTLS loads the TLS flags' files; nil without --tls-cert. Errors
// wrap ErrInvalidConfig (Validate has checked the same files).
func newNodeTLS(cfg Config, log zerolog.Logger) (*nodeTLS, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	pair, err := tlsfiles.NewPair(cfg.TLSCert, cfg.TLSKey, log.With().Str("component", "tls").Logger())
	if err != nil {
		return nil, fmt.Errorf("%w: --tls-cert %s, --tls-key %s: %w", ErrInvalidConfig, cfg.TLSCert, cfg.TLSKey, err)
	}
	var clientCAs, peerCAs *x509.CertPool
	if cfg.TLSClientCA != "" {
		if clientCAs, err = tlsfiles.LoadCA(cfg.TLSClientCA); err != nil {
			return nil, fmt.Errorf("%w: --tls-client-ca: %w", ErrInvalidConfig, err)
		}
		peerCAs = clientCAs
	}
	if cfg.TLSCA != "" {
		if peerCAs, err = tlsfiles.LoadCA(cfg.TLSCA); err != nil {
			return nil, fmt.Errorf("%w: --tls-ca: %w", ErrInvalidConfig, err)
		}
	}
	t := &nodeTLS{server: tlsfiles.ServerConfig(pair, clientCAs), peers: tlsfiles.ClientConfig(peerCAs, pair)}
	if t.api, err = tlsfiles.ParseAllowList(cfg.TLSClientAllow); err != nil {
		return nil, fmt.Errorf("%w: --tls-client-allow: %w", ErrInvalidConfig, err)
	}
	if t.admin, err = tlsfiles.ParseAllowList(cfg.TLSAdminAllow); err != nil {
		return nil, fmt.Errorf("%w: --tls-admin-allow: %w", ErrInvalidConfig, err)
	}
	if len(t.admin) == 0 {
		t.admin = t.api
	}
	return t, nil
}

// peerConfig is the TLS configuration of the node's requests to its peers
// (nil: plain HTTP).
func (t *nodeTLS) peerConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return t.peers
}

// failures returns the failed handshakes by reason, in the order of
// tlsfiles.Reasons (nil without TLS).
func (t *nodeTLS) failures() []uint64 {
	if t == nil {
		return nil
	}
	return t.fails.Counts()
}

// authorizer returns server.Config.Authorize: nil unless an allow-list is
// set, so that the API's hot path checks nothing by default.
func (t *nodeTLS) authorizer() func(*fasthttp.RequestCtx) error {
	if t == nil || (len(t.api) == 0 && len(t.admin) == 0) {
		return nil
	}
	return t.authorize
}

// authorize lets a request through when its client certificate's name is
// on the allow-list of its path: --tls-admin-allow for the admin paths,
// --tls-client-allow for the others. The node's server and the start
// phase's server both ask it.
func (t *nodeTLS) authorize(ctx *fasthttp.RequestCtx) error {
	list, flag := t.api, "--tls-client-allow"
	if adminPath(ctx.Path()) {
		list, flag = t.admin, "--tls-admin-allow"
	}
	if cert, ok := allows(ctx, list); !ok {
		return fmt.Errorf("client certificate %q is not allowed on %s (%s)", tlsfiles.Name(cert), ctx.Path(), flag)
	}
	return nil
}

// adminCheck returns server.StartingConfig.Admin: nil (every client is an
// admin) unless an admin allow-list is set, as for the admin paths.
func (t *nodeTLS) adminCheck() func(*fasthttp.RequestCtx) bool {
	if t == nil || len(t.admin) == 0 {
		return nil
	}
	return t.isAdmin
}

// isAdmin reports whether the request's client may read the admin paths
// (/status, /metrics, /clock): its certificate's name is on
// --tls-admin-allow, else on --tls-client-allow, as authorize decides for
// those paths.
func (t *nodeTLS) isAdmin(ctx *fasthttp.RequestCtx) bool {
	_, ok := allows(ctx, t.admin)
	return ok
}

// allows reports whether list lets the request's client through, and
// returns the client's certificate (nil without one).
func allows(ctx *fasthttp.RequestCtx, list tlsfiles.AllowList) (*x509.Certificate, bool) {
	if len(list) == 0 {
		return nil, true
	}
	var cert *x509.Certificate
	if st := ctx.TLSConnectionState(); st != nil && len(st.PeerCertificates) > 0 {
		cert = st.PeerCertificates[0]
	}
	return cert, list.Allows(cert)
}

// adminPaths are the paths --tls-admin-allow guards: the node's state,
// not its IDs.
var adminPaths = [][]byte{[]byte(statusPath), []byte(metricsPath), []byte("/clock")}

// adminPath reports whether path is one of adminPaths or under /debug/
// (the chaos build's endpoints).
func adminPath(path []byte) bool {
	for _, p := range adminPaths {
		if bytes.Equal(path, p) {
			return true
		}
	}
	return bytes.HasPrefix(path, []byte("/debug/"))
}
