package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// The client speaks the small part of HTTP/1.1 that snowflaked's answers
// use, over keep-alive connections of its own: a GET, then a status line,
// headers and a body of Content-Length bytes. Owning the connections is what
// lets Close close every one of them at once (no idle connection nor
// background goroutine outlives the client), bound an answer's size before
// reading it, and make a call without a goroutine hand-off.

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
	nc   net.Conn
	addr string
	r    *bufio.Reader
	req  []byte // the request being written
	body []byte // the last answer's body, reused
	used time.Time
}

// pool holds the connections of a Client: the idle ones per node, and every
// open one, so Close can close them all.
type pool struct {
	maxIdle int // idle connections kept per node
	dial    func(addr string, deadline time.Time) (net.Conn, error)
	// probe, when set (a plain-HTTP pool), reports whether addr serves
	// HTTPS: asked when a new connection ended before any answer.
	probe  func(addr string, deadline time.Time) bool
	cancel context.CancelFunc // aborts dials in progress on close

	mu     sync.Mutex
	idle   map[string][]*httpConn
	open   map[*httpConn]struct{}
	closed bool
}

// newPool returns a pool that dials plain TCP, or TLS with tlsCfg when it
// is not nil.
func newPool(maxIdle int, tlsCfg *tls.Config) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{
		maxIdle: maxIdle, cancel: cancel,
		dial: func(addr string, deadline time.Time) (net.Conn, error) {
			d := net.Dialer{Deadline: deadline}
			nc, err := d.DialContext(ctx, "tcp", addr)
			if err != nil || tlsCfg == nil {
				return nc, err
			}
			return dialTLS(ctx, nc, addr, deadline, tlsCfg)
		},
		idle: map[string][]*httpConn{},
		open: map[*httpConn]struct{}{},
	}
	if tlsCfg == nil {
		p.probe = func(addr string, deadline time.Time) bool { return servesTLS(ctx, addr, deadline) }
	}
	return p
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
	nc, err := p.dial(addr, deadline)
	if err != nil {
		return nil, false, err
	}
	hc := &httpConn{nc: nc, addr: addr, r: bufio.NewReaderSize(nc, 4096)}
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
			if !reused && p.probe != nil && errors.Is(err, errNoAnswer) && p.probe(addr, deadline) {
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
	hc.req = append(hc.req, path...)
	hc.req = append(hc.req, " HTTP/1.1\r\nHost: "...)
	hc.req = append(hc.req, hc.addr...)
	hc.req = append(hc.req, "\r\nUser-Agent: snowflaked-client\r\n"...)
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

// read parses the status line, the headers and the body.
func (hc *httpConn) read(maxBody int) (a answer, keep bool, err error) {
	line, n, err := hc.line(0)
	if err != nil {
		return a, false, err
	}
	// "HTTP/1.1 200 OK"
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	switch {
	case string(proto) == "HTTP/1.1":
		keep = true
	case string(proto) == "HTTP/1.0":
	default:
		return a, false, fmt.Errorf("%w: status line %q", errAnswer, truncate(line))
	}
	if len(code) != 3 {
		return a, false, fmt.Errorf("%w: status line %q", errAnswer, truncate(line))
	}
	a.status, err = strconv.Atoi(string(code))
	if err != nil || a.status < 100 {
		return a, false, fmt.Errorf("%w: status line %q", errAnswer, truncate(line))
	}
	length := -1
	for lines := 0; ; lines++ {
		if lines == maxHeaderLines {
			return a, false, fmt.Errorf("%w: more than %d header lines", errAnswer, maxHeaderLines)
		}
		if line, n, err = hc.line(n); err != nil {
			return a, false, err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return a, false, fmt.Errorf("%w: header line %q", errAnswer, truncate(line))
		}
		value = bytes.TrimSpace(value)
		switch {
		case equalFold(name, "Content-Length"):
			v, err := strconv.Atoi(string(value))
			if err != nil || v < 0 || (length >= 0 && v != length) {
				return a, false, fmt.Errorf("%w: Content-Length %q", errAnswer, truncate(value))
			}
			length = v
		case equalFold(name, "Transfer-Encoding"):
			return a, false, fmt.Errorf("%w: Transfer-Encoding %q (a snowflaked node sends Content-Length)", errAnswer, truncate(value))
		case equalFold(name, "Connection"):
			keep = keep && !equalFold(value, "close")
		case equalFold(name, "Retry-After"):
			if s, err := strconv.Atoi(string(value)); err == nil && s > 0 && s < 3600 {
				a.retryAfter = time.Duration(s) * time.Second
			}
		}
	}
	if length < 0 {
		return a, false, fmt.Errorf("%w: no Content-Length", errAnswer)
	}
	limit := maxBody
	if a.status != 200 {
		limit = maxErrorBody
	}
	if length > limit {
		return a, false, fmt.Errorf("%w: a body of %d bytes, more than the %d expected at most", errAnswer, length, limit)
	}
	if cap(hc.body) < length {
		hc.body = make([]byte, length)
	}
	a.body = hc.body[:length]
	if _, err := io.ReadFull(hc.r, a.body); err != nil {
		return a, false, fmt.Errorf("read body: %w", err)
	}
	return a, keep, nil
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
