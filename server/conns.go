package server

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
)

// connTracker wraps the listener so Shutdown can close connections that
// never sent a byte. fasthttp counts such a connection as busy (it waits
// for its first request up to ReadTimeout, 10s by default), so a client's
// spare connection, dialed just before SIGTERM and never used, would hold
// the drain for the whole --shutdown-timeout; it carries no request, so
// closing it loses nothing.
type connTracker struct {
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
}

type trackingListener struct {
	net.Listener
	t *connTracker
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: l.t}
	l.t.mu.Lock()
	l.t.conns[tc] = struct{}{}
	l.t.mu.Unlock()
	if ts, ok := c.(tlsState); ok {
		return &trackedTLSConn{trackedConn: tc, tls: ts}, nil
	}
	return tc, nil
}

// tlsState is what fasthttp looks for to tell a TLS connection
// (RequestCtx.IsTLS, TLSConnectionState): a tracked TLS connection keeps it.
type tlsState interface {
	Handshake() error
	ConnectionState() tls.ConnectionState
}

// trackedTLSConn is a trackedConn over a TLS connection.
type trackedTLSConn struct {
	*trackedConn
	tls tlsState
}

func (c *trackedTLSConn) Handshake() error                     { return c.tls.Handshake() }
func (c *trackedTLSConn) ConnectionState() tls.ConnectionState { return c.tls.ConnectionState() }

type trackedConn struct {
	net.Conn
	t       *connTracker
	started atomic.Bool // a byte arrived: fasthttp's own idle handling applies
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.started.Load() {
		c.started.Store(true)
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	delete(c.t.conns, c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}

// closeUnstarted closes the connections that never sent a byte.
func (t *connTracker) closeUnstarted() {
	t.mu.Lock()
	var idle []*trackedConn
	for c := range t.conns {
		if !c.started.Load() {
			idle = append(idle, c)
		}
	}
	t.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}

// onceCloseListener closes its listener once: Shutdown closes it before
// fasthttp's drain closes it again, and the second Close is not an error.
type onceCloseListener struct {
	net.Listener
	once sync.Once
	err  error
}

// Close closes the listener the first time and returns that result every time.
func (l *onceCloseListener) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}
