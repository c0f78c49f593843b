package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The client speaks the small part of HTTP/1.1 that snowflaked's answers
// use, over keep-alive connections of its own: a GET, then a status line,
// headers and a body of Content-Length bytes or chunked (as a reverse
// proxy in front of the nodes may stream it). Owning the connections is
// what lets Close close every one of them at once (no idle connection nor
// background goroutine outlives the client), bound an answer's size before
// reading it, and make a call without a goroutine hand-off: on loopback a
// call costs about half of what it costs through net/http
// (BenchmarkTransport).
//
// Proxies are those of the environment, as net/http picks them
// (http.ProxyFromEnvironment: HTTP_PROXY for http:// nodes, HTTPS_PROXY for
// https:// ones, NO_PROXY, never for localhost or a loopback address): a
// plain request goes to the proxy in absolute form, an HTTPS connection is
// tunnelled with CONNECT and verified as the node's own.

// Limits on what a node may answer.
const (
	maxHeaderBytes = 16 << 10 // status line and headers together
	maxHeaderLines = 100
	// maxErrorBody bounds an answer that is not IDs (a JSON error).
	maxErrorBody = 64 << 10
	// maxIdleAge: a connection idle longer than this is closed, not reused
	// (the node closes idle connections after a minute).
	maxIdleAge = 30 * time.Second
)

// errAnswer marks an answer that is not HTTP as snowflaked speaks it.
var errAnswer = errors.New("malformed answer")

// What a client that speaks the other protocol than the node's meets,
// in words that say what to change (a bare EOF, or a TLS record header
// error, says neither).
var (
	// errServesHTTPS: a plain-HTTP request met a node serving HTTPS, which
	// closed the connection without a word, and the port answers a TLS
	// ClientHello with a TLS handshake record (0x16 0x03).
	errServesHTTPS = errors.New("the node serves HTTPS: use https:// (the Go client's Config.TLS, snowflakectl's --tls-ca)")
	// errServesHTTP: the node answered the TLS ClientHello in plain HTTP.
	errServesHTTP = errors.New("the node serves plain HTTP: use http:// (no Config.TLS in the Go client, no --tls-* flag in snowflakectl)")
)

// httpConn is one keep-alive connection to a node.
type httpConn struct {
	nc    net.Conn
	addr  string
	route route
	r     *bufio.Reader
	req   []byte // the request being written
	body  []byte // the last answer's body, reused
	used  time.Time
}

// route is how a connection reaches its node: directly (the zero
// value), or through a proxy that takes requests in absolute form
// (prefix "http://host:port", and the proxy's credentials, a header line).
// A CONNECT tunnel is direct to the node once open.
type route struct {
	prefix string
	auth   string
}

// pool holds the connections of a Client: the idle ones per node, and every
// open one, so Close can close them all.
type pool struct {
	maxIdle int // idle connections kept per node
	dial    func(addr string, deadline time.Time) (net.Conn, route, error)
	// probe, when set (a plain-HTTP pool), reports whether addr serves
	// HTTPS: asked when a new connection ended before any answer.
	probe  func(addr string, deadline time.Time) bool
	ctx    context.Context    // cancelled on close: the dials' context
	cancel context.CancelFunc // aborts dials in progress on close

	mu     sync.Mutex
	idle   map[string][]*httpConn
	open   map[*httpConn]struct{}
	closed bool
}

// newPool returns a pool that dials plain TCP, or TLS with tlsCfg when it
// is not nil, through the proxy the environment names for each node.
func newPool(maxIdle int, tlsCfg *tls.Config) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	d := dialer{ctx: ctx, tls: tlsCfg, proxy: http.ProxyFromEnvironment}
	p := &pool{
		maxIdle: maxIdle, ctx: ctx, cancel: cancel, dial: d.dial,
		idle: map[string][]*httpConn{},
		open: map[*httpConn]struct{}{},
	}
	if tlsCfg == nil {
		p.probe = func(addr string, deadline time.Time) bool { return servesTLS(ctx, addr, deadline) }
	}
	return p
}

// dialer opens the connections of a pool.
type dialer struct {
	ctx context.Context // cancelled on close
	tls *tls.Config     // nil: plain HTTP
	// proxy names the proxy of a request (nil: none).
	proxy func(*http.Request) (*url.URL, error)
}

// dial opens a connection to addr within deadline, through the proxy the
// environment names for it, if any.
func (d dialer) dial(addr string, deadline time.Time) (net.Conn, route, error) {
	scheme := "http"
	if d.tls != nil {
		scheme = "https"
	}
	proxy, err := d.proxy(&http.Request{URL: &url.URL{Scheme: scheme, Host: addr}})
	if err != nil {
		return nil, route{}, fmt.Errorf("the proxy for %s://%s: %w", scheme, addr, err)
	}
	if proxy == nil {
		nc, err := d.tcp(addr, deadline)
		if err != nil || d.tls == nil {
			return nc, route{}, err
		}
		nc, err = dialTLS(d.ctx, nc, addr, deadline, d.tls)
		return nc, route{}, err
	}
	nc, err := d.dialProxy(proxy, deadline)
	if err != nil {
		return nil, route{}, err
	}
	auth := proxyAuth(proxy)
	if d.tls == nil {
		return nc, route{prefix: "http://" + addr, auth: auth}, nil
	}
	if err := connect(d.ctx, nc, addr, auth, deadline); err != nil {
		_ = nc.Close()
		return nil, route{}, fmt.Errorf("proxy %s: %w", proxy.Redacted(), err)
	}
	nc, err = dialTLS(d.ctx, nc, addr, deadline, d.tls)
	return nc, route{}, err
}

func (d dialer) tcp(addr string, deadline time.Time) (net.Conn, error) {
	nd := net.Dialer{Deadline: deadline}
	return nd.DialContext(d.ctx, "tcp", addr)
}

// dialProxy opens a connection to proxy: TCP to an http:// proxy, TLS
// (verified with the system's roots) to an https:// one.
func (d dialer) dialProxy(proxy *url.URL, deadline time.Time) (net.Conn, error) {
	port := proxy.Port()
	switch {
	case proxy.Scheme != "http" && proxy.Scheme != "https":
		return nil, fmt.Errorf("proxy %s: scheme %q not supported (http or https)", proxy.Redacted(), proxy.Scheme)
	case port == "" && proxy.Scheme == "http":
		port = "80"
	case port == "":
		port = "443"
	}
	addr := net.JoinHostPort(proxy.Hostname(), port)
	nc, err := d.tcp(addr, deadline)
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", proxy.Redacted(), err)
	}
	if proxy.Scheme == "https" {
		if nc, err = dialTLS(d.ctx, nc, addr, deadline, &tls.Config{MinVersion: tls.VersionTLS12}); err != nil {
			return nil, fmt.Errorf("proxy %s: %w", proxy.Redacted(), err)
		}
	}
	return nc, nil
}

// proxyAuth is the Proxy-Authorization header line of proxy's
// credentials ("" for none).
func proxyAuth(proxy *url.URL) string {
	if proxy.User == nil {
		return ""
	}
	pass, _ := proxy.User.Password()
	return "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(proxy.User.Username()+":"+pass)) + "\r\n"
}

// connect asks the proxy on nc for a tunnel to addr (CONNECT) and reads
// its answer: a 2xx opens the tunnel.
func connect(ctx context.Context, nc net.Conn, addr, auth string, deadline time.Time) (err error) {
	if err := nc.SetDeadline(deadline); err != nil {
		return err
	}
	// Close cancels ctx: a proxy that never answers must not hold the call
	// to its deadline. A deadline in the past ends the read at once.
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() && err == nil {
			err = fmt.Errorf("CONNECT %s: %w", addr, context.Cause(ctx))
		}
	}()
	req := "CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: snowflaked-client\r\n" + auth + "\r\n"
	if _, err := io.WriteString(nc, req); err != nil {
		return fmt.Errorf("CONNECT %s: %w", addr, err)
	}
	hc := &httpConn{nc: nc, addr: addr, r: bufio.NewReaderSize(nc, 4096)}
	h, err := hc.readHead()
	switch {
	case err != nil:
		return fmt.Errorf("CONNECT %s: %w", addr, err)
	case h.status/100 != 2:
		return fmt.Errorf("CONNECT %s: the proxy answered status %d", addr, h.status)
	case hc.r.Buffered() > 0:
		return fmt.Errorf("CONNECT %s: %w: bytes after the proxy's answer", addr, errAnswer)
	}
	return nc.SetDeadline(time.Time{})
}

// servesTLS reports whether addr answers a TLS ClientHello with a TLS
// record (a handshake, 0x16 0x03, or an alert, 0x15 0x03), within
// deadline. Only the answer's first bytes count: the handshake is not
// meant to succeed (nothing verifies the node here, and nothing is sent
// after the ClientHello).
func servesTLS(ctx context.Context, addr string, deadline time.Time) bool {
	d := net.Dialer{Deadline: deadline}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer nc.Close()
	rec := &firstBytes{Conn: nc}
	host, _, _ := net.SplitHostPort(addr)
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_ = tls.Client(rec, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}).HandshakeContext(hctx)
	return rec.n >= 2 && (rec.b[0] == 0x16 || rec.b[0] == 0x15) && rec.b[1] == 0x03
}

// firstBytes keeps the first two bytes read from a connection.
type firstBytes struct {
	net.Conn
	b [2]byte
	n int
}

func (f *firstBytes) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	for i := 0; i < n && f.n < len(f.b); i++ {
		f.b[f.n] = p[i]
		f.n++
	}
	return n, err
}

// answeredHTTP reports whether a failed TLS handshake met an answer in
// plain HTTP ("HTTP/" where a TLS record header was expected).
func answeredHTTP(err error) bool {
	var rh tls.RecordHeaderError
	return errors.As(err, &rh) && bytes.HasPrefix(rh.RecordHeader[:], []byte("HTTP/"))
}

// dialTLS runs a TLS handshake over nc within deadline; the server is
// verified as addr's host unless cfg names a ServerName.
func dialTLS(ctx context.Context, nc net.Conn, addr string, deadline time.Time, cfg *tls.Config) (net.Conn, error) {
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	hctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = nc.Close()
		if answeredHTTP(err) {
			return nil, fmt.Errorf("TLS handshake with %s: %w: it answered the TLS ClientHello in HTTP (%w)", addr, errServesHTTP, err)
		}
		return nil, fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return tc, nil
}

// get returns an idle connection to addr (reused true) or, when there is
// none or fresh is set, a new one.
func (p *pool) get(addr string, deadline time.Time, fresh bool) (*httpConn, bool, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, ErrClosed
	}
	var stale []*httpConn
	for l := p.idle[addr]; !fresh && len(l) > 0; l = p.idle[addr] {
		hc := l[len(l)-1]
		l[len(l)-1] = nil
		p.idle[addr] = l[:len(l)-1]
		if time.Since(hc.used) > maxIdleAge {
			stale = append(stale, hc)
			continue
		}
		p.mu.Unlock()
		p.closeAll(stale)
		return hc, true, nil
	}
	p.mu.Unlock()
	p.closeAll(stale)
	nc, rt, err := p.dial(addr, deadline)
	if err != nil {
		return nil, false, err
	}
	hc := &httpConn{nc: nc, addr: addr, route: rt, r: bufio.NewReaderSize(nc, 4096)}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = nc.Close()
		return nil, false, ErrClosed
	}
	p.open[hc] = struct{}{}
	return hc, false, nil
}

// put returns a connection that served a whole answer; beyond maxIdle per
// node, once the pool closed, or with bytes the node sent beyond the answer
// (they would be read as the next answer), it is closed instead.
func (p *pool) put(hc *httpConn) {
	hc.used = time.Now()
	p.mu.Lock()
	if !p.closed && len(p.idle[hc.addr]) < p.maxIdle && hc.r.Buffered() == 0 {
		p.idle[hc.addr] = append(p.idle[hc.addr], hc)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.discard(hc)
}

// discard closes a connection that cannot be reused.
func (p *pool) discard(hc *httpConn) {
	p.mu.Lock()
	delete(p.open, hc)
	p.mu.Unlock()
	_ = hc.nc.Close()
}

// dropIdle closes the idle connections to addr: after one of them turned
// out closed by the node (a restart), the others, idle at least as long,
// are too.
func (p *pool) dropIdle(addr string) {
	p.mu.Lock()
	l := p.idle[addr]
	delete(p.idle, addr)
	p.mu.Unlock()
	p.closeAll(l)
}

// keepOnly closes the idle connections to nodes not in addrs (nodes that
// left the list).
func (p *pool) keepOnly(addrs []string) {
	keep := map[string]bool{}
	for _, a := range addrs {
		keep[a] = true
	}
	var gone []*httpConn
	p.mu.Lock()
	for a, l := range p.idle {
		if !keep[a] {
			gone = append(gone, l...)
			delete(p.idle, a)
		}
	}
	p.mu.Unlock()
	p.closeAll(gone)
}

func (p *pool) closeAll(l []*httpConn) {
	for _, hc := range l {
		p.discard(hc)
	}
}

// close closes every connection, idle or in use (a request in flight fails
// at once), and refuses new ones.
func (p *pool) close() {
	p.cancel()
	p.mu.Lock()
	p.closed = true
	all := make([]*httpConn, 0, len(p.open))
	for hc := range p.open {
		all = append(all, hc)
	}
	clear(p.open)
	clear(p.idle)
	p.mu.Unlock()
	for _, hc := range all {
		_ = hc.nc.Close()
	}
}

// conns is the number of open connections.
func (p *pool) conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.open)
}

// answer is a node's answer; body is valid until the connection is used
// again.
type answer struct {
	status     int
	retryAfter time.Duration // 0: none given
	body       []byte
}

// roundTrip sends GET path to addr, with the header lines in header (each
// ending in CRLF; "" for none), and reads the answer, whose body may be
// at most maxBody bytes when the status is 200 (maxErrorBody otherwise).
// use is called with the answer before the connection goes back to the
// pool. A reused connection that the node closed meanwhile (it fails
// before the first byte of an answer) is replaced once by a new one: the
// request never reached a handler.
func (p *pool) roundTrip(addr, path, header string, deadline time.Time, maxBody int, use func(answer) error) error {
	for try := 0; ; try++ {
		hc, reused, err := p.get(addr, deadline, try > 0)
		if err != nil {
			return err
		}
		a, keep, err := hc.do(path, header, deadline, maxBody)
		if err != nil {
			p.discard(hc)
			if reused && try == 0 && errors.Is(err, errNoAnswer) && time.Now().Before(deadline) {
				p.dropIdle(addr) // the retry dials: the other idle ones are likely dead too
				continue
			}
			if !reused && p.probe != nil && hc.route.prefix == "" && errors.Is(err, errNoAnswer) && p.probe(addr, deadline) {
				// A new plain-HTTP connection closed before any answer, by
				// a port that speaks TLS: the request never reached a handler.
				return fmt.Errorf("%w: it closed a plain-HTTP request without an answer (%w)", errServesHTTPS, err)
			}
			return err
		}
		err = use(a)
		if keep {
			p.put(hc)
		} else {
			p.discard(hc)
		}
		return err
	}
}

// errNoAnswer: the connection ended before the first byte of an answer.
var errNoAnswer = errors.New("connection closed before an answer")

// do writes the request and reads the answer. keep says whether the
// connection may serve another request.
func (hc *httpConn) do(path, header string, deadline time.Time, maxBody int) (a answer, keep bool, err error) {
	if err := hc.nc.SetDeadline(deadline); err != nil {
		return a, false, err
	}
	hc.req = append(hc.req[:0], "GET "...)
	hc.req = append(hc.req, hc.route.prefix...) // absolute form to a proxy
	hc.req = append(hc.req, path...)
	hc.req = append(hc.req, " HTTP/1.1\r\nHost: "...)
	hc.req = append(hc.req, hc.addr...)
	hc.req = append(hc.req, "\r\nUser-Agent: snowflaked-client\r\n"...)
	hc.req = append(hc.req, hc.route.auth...)
	hc.req = append(hc.req, header...)
	hc.req = append(hc.req, "\r\n"...)
	if _, err := hc.nc.Write(hc.req); err != nil {
		return a, false, noAnswer(err)
	}
	if _, err := hc.r.Peek(1); err != nil {
		return a, false, noAnswer(err)
	}
	return hc.read(maxBody)
}

// noAnswer marks a connection that ended cleanly or was reset before any
// answer as errNoAnswer; a timeout stays what it is.
func noAnswer(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return err
	}
	return fmt.Errorf("%w: %w", errNoAnswer, err)
}

// read parses the status line, the headers and the body: of
// Content-Length bytes, or chunked.
func (hc *httpConn) read(maxBody int) (a answer, keep bool, err error) {
	h, err := hc.readHead()
	if err != nil {
		return a, false, err
	}
	a.status, a.retryAfter = h.status, h.retryAfter
	limit := maxBody
	if a.status != 200 {
		limit = maxErrorBody
	}
	switch {
	case h.chunked:
		a.body, err = hc.readChunked(limit)
	case h.length < 0:
		return a, false, fmt.Errorf("%w: no Content-Length, and not chunked", errAnswer)
	case h.length > limit:
		return a, false, fmt.Errorf("%w: a body of %d bytes, more than the %d expected at most", errAnswer, h.length, limit)
	default:
		if cap(hc.body) < h.length {
			hc.body = make([]byte, h.length)
		}
		a.body = hc.body[:h.length]
		if _, err = io.ReadFull(hc.r, a.body); err != nil {
			err = fmt.Errorf("read body: %w", err)
		}
	}
	if err != nil {
		return a, false, err
	}
	return a, h.keep, nil
}

// head is what an answer's status line and headers say.
type head struct {
	status     int
	keep       bool          // the connection may serve another request
	length     int           // Content-Length; -1: none
	chunked    bool          // Transfer-Encoding: chunked
	retryAfter time.Duration // 0: none given
}

// readHead reads the status line and the headers.
func (hc *httpConn) readHead() (h head, err error) {
	line, n, err := hc.line(0)
	if err != nil {
		return h, err
	}
	if h.status, h.keep, err = statusLine(line); err != nil {
		return h, err
	}
	h.length = -1
	for lines := 0; ; lines++ {
		if lines == maxHeaderLines {
			return h, fmt.Errorf("%w: more than %d header lines", errAnswer, maxHeaderLines)
		}
		if line, n, err = hc.line(n); err != nil {
			return h, err
		}
		if len(line) == 0 {
			return h, nil
		}
		if err := h.header(line); err != nil {
			return h, err
		}
	}
}

// statusLine parses "HTTP/1.1 200 OK"; keep says whether the protocol
// keeps the connection alive.
func statusLine(line []byte) (status int, keep bool, err error) {
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	switch string(proto) {
	case "HTTP/1.1":
		keep = true
	case "HTTP/1.0":
	default:
		return 0, false, fmt.Errorf("%w: status line %q", errAnswer, truncate(line))
	}
	status, err = strconv.Atoi(string(code))
	if len(code) != 3 || err != nil || status < 100 {
		return 0, false, fmt.Errorf("%w: status line %q", errAnswer, truncate(line))
	}
	return status, keep, nil
}

// header takes in one header line.
func (h *head) header(line []byte) error {
	name, value, ok := bytes.Cut(line, []byte(":"))
	if !ok {
		return fmt.Errorf("%w: header line %q", errAnswer, truncate(line))
	}
	value = bytes.TrimSpace(value)
	switch {
	case equalFold(name, "Content-Length"):
		v, err := strconv.Atoi(string(value))
		if err != nil || v < 0 || (h.length >= 0 && v != h.length) {
			return fmt.Errorf("%w: Content-Length %q", errAnswer, truncate(value))
		}
		h.length = v
	case equalFold(name, "Transfer-Encoding"):
		// chunked is the only coding asked for (no TE header): a
		// Content-Length beside it is ignored, as RFC 9112 says.
		if !equalFold(value, "chunked") || h.chunked {
			return fmt.Errorf("%w: Transfer-Encoding %q (want chunked)", errAnswer, truncate(value))
		}
		h.chunked = true
	case equalFold(name, "Connection"):
		h.keep = h.keep && !equalFold(value, "close")
	case equalFold(name, "Retry-After"):
		if s, err := strconv.Atoi(string(value)); err == nil && s > 0 && s < 3600 {
			h.retryAfter = time.Duration(s) * time.Second
		}
	}
	return nil
}

// maxChunkLine bounds a chunk's size line (the size and its extensions).
const maxChunkLine = 1024

// readChunked reads a chunked body of at most limit bytes, and its
// trailers (ignored). The framing is bounded too: the size lines and
// trailers of a body may take at most maxHeaderBytes plus 8 bytes per
// byte of body (a proxy that streams a byte a chunk).
func (hc *httpConn) readChunked(limit int) ([]byte, error) {
	body := hc.body[:0]
	framing := 0
	for {
		line, err := hc.chunkLine(&framing, len(body))
		if err != nil {
			return nil, err
		}
		size, err := chunkSize(line)
		switch {
		case err != nil:
			return nil, err
		case size == 0:
			hc.body = body
			return body, hc.trailers(&framing, len(body))
		case size > limit-len(body):
			return nil, fmt.Errorf("%w: a chunked body of more than the %d bytes expected at most", errAnswer, limit)
		}
		body = slices.Grow(body, size)
		if _, err := io.ReadFull(hc.r, body[len(body):len(body)+size]); err != nil {
			return nil, fmt.Errorf("read chunk: %w", err)
		}
		body = body[:len(body)+size]
		crlf, err := hc.r.Peek(2)
		if err != nil || string(crlf) != "\r\n" {
			return nil, fmt.Errorf("%w: a chunk not followed by CRLF (%q)", errAnswer, crlf)
		}
		_, _ = hc.r.Discard(2)
		framing += 2
	}
}

// chunkLine reads one line of a chunked body's framing, counting it in
// framing against the bound for a body of n bytes so far.
func (hc *httpConn) chunkLine(framing *int, n int) ([]byte, error) {
	l, err := hc.r.ReadSlice('\n')
	*framing += len(l)
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(l) > maxChunkLine:
		return nil, fmt.Errorf("%w: a chunk line longer than %d bytes", errAnswer, maxChunkLine)
	case err != nil:
		return nil, fmt.Errorf("read chunk: %w", err)
	case *framing > maxHeaderBytes+8*n:
		return nil, fmt.Errorf("%w: %d bytes of chunk framing for %d bytes of body", errAnswer, *framing, n)
	}
	return bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r")), nil
}

// chunkSize parses a chunk's size line: hex digits, then optional
// extensions after ';' (ignored).
func chunkSize(line []byte) (int, error) {
	digits, _, _ := bytes.Cut(line, []byte(";"))
	digits = bytes.TrimRight(digits, " \t")
	size, err := strconv.ParseUint(string(digits), 16, 64)
	if len(digits) == 0 || err != nil {
		return 0, fmt.Errorf("%w: chunk size %q", errAnswer, truncate(line))
	}
	return int(min(size, math.MaxInt32)), nil // beyond any bound on a body
}

// trailers reads the trailer lines after the last chunk, up to the empty
// line.
func (hc *httpConn) trailers(framing *int, n int) error {
	for range maxHeaderLines {
		line, err := hc.chunkLine(framing, n)
		if err != nil || len(line) == 0 {
			return err
		}
	}
	return fmt.Errorf("%w: more than %d trailer lines", errAnswer, maxHeaderLines)
}

// line reads one header line without its CRLF; n counts the header bytes
// read so far.
func (hc *httpConn) line(n int) ([]byte, int, error) {
	l, err := hc.r.ReadSlice('\n')
	n += len(l)
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || n > maxHeaderBytes:
		return nil, n, fmt.Errorf("%w: headers longer than %d bytes", errAnswer, maxHeaderBytes)
	case err != nil:
		return nil, n, fmt.Errorf("read header: %w", err)
	}
	l = l[:len(l)-1]
	if len(l) > 0 && l[len(l)-1] == '\r' {
		l = l[:len(l)-1]
	}
	return l, n, nil
}

// equalFold compares ASCII case-insensitively without allocating.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
