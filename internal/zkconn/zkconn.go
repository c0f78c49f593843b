// Package zkconn is the seam between snowflaked and ZooKeeper: the calls
// the coordinator and the segment store make on a session, and how one is
// opened. Production code dials go-zookeeper (Dial); simulations dial an
// in-memory ZooKeeper (package zkmem) that can lose requests and answers.
package zkconn

import (
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/client/zktls"
)

// Conn is one ZooKeeper client: a session that survives reconnects until
// it expires. *zk.Conn implements it. Every call may block until the server
// answers; callers bound them (the answer of a call that gave up may still
// have been applied).
type Conn interface {
	Get(path string) ([]byte, *zk.Stat, error)
	Exists(path string) (bool, *zk.Stat, error)
	ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error)
	Children(path string) ([]string, *zk.Stat, error)
	ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error)
	Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
	Set(path string, data []byte, version int32) (*zk.Stat, error)
	Delete(path string, version int32) error
	// GetACL reads a znode's ACL.
	GetACL(path string) ([]zk.ACL, *zk.Stat, error)
	// Multi applies ops (*zk.CreateRequest, *zk.SetDataRequest,
	// *zk.DeleteRequest, *zk.CheckVersionRequest) all or none; on failure
	// the failed op's response carries its error.
	Multi(ops ...any) ([]zk.MultiResponse, error)
	// Sync makes the server this session reads from catch up with the
	// leader.
	Sync(path string) (string, error)
	AddAuth(scheme string, auth []byte) error
	SessionID() int64
	State() zk.State
	// Close ends the session (its ephemeral znodes go with it).
	Close()
}

// Options are what a Dialer needs besides the servers.
type Options struct {
	// SessionTimeout is the session timeout asked for.
	SessionTimeout time.Duration
	// OnEvent, when set, receives every session event; it must not block.
	OnEvent func(zk.Event)
	// Logger, when set, receives the client's log lines.
	Logger zk.Logger
}

// Dialer opens a ZooKeeper client without waiting for its session.
type Dialer func(servers []string, opt Options) (Conn, error)

// Dial opens a go-zookeeper client: the production Dialer.
func Dial(servers []string, opt Options) (Conn, error) {
	return connect(servers, opt, nil)
}

// connect is zk.Connect with opt's callback and logger, dialing with dial
// (nil: go-zookeeper's plain TCP).
func connect(servers []string, opt Options, dial zk.Dialer) (*zk.Conn, error) {
	logger := opt.Logger
	if logger == nil {
		logger = zk.DefaultLogger
	}
	var conn *zk.Conn
	var err error
	if dial == nil {
		conn, _, err = zk.Connect(servers, opt.SessionTimeout, zk.WithEventCallback(opt.OnEvent), zk.WithLogger(logger))
	} else {
		conn, _, err = zk.Connect(servers, opt.SessionTimeout, zk.WithEventCallback(opt.OnEvent), zk.WithLogger(logger), zk.WithDialer(dial))
	}
	if err != nil {
		return nil, err
	}
	return conn, nil
}

// TLSDial returns the production Dialer over TLS: go-zookeeper dialing
// each server with zktls.Dialer(cfg). Its Conns also report the last
// failed dial (DialErrorer), so that a session that never comes can say
// why (a certificate the server rejected, one that does not verify).
// A nil cfg is Dial.
func TLSDial(cfg *tls.Config) Dialer {
	if cfg == nil {
		return Dial
	}
	return func(servers []string, opt Options) (Conn, error) {
		c := &tlsConn{}
		dial := zktls.Dialer(cfg)
		conn, err := connect(servers, opt, func(network, address string, timeout time.Duration) (net.Conn, error) {
			nc, err := dial(network, address, timeout)
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
			return nc, err
		})
		if err != nil {
			return nil, err
		}
		c.Conn = conn
		return c, nil
	}
}

// DialErrorer is implemented by Conns that remember why their last
// connection attempt failed.
type DialErrorer interface {
	// DialError is the error of the last connection attempt, nil when it
	// succeeded or none was made yet.
	DialError() error
}

// tlsConn is a go-zookeeper client over TLS that remembers its last dial
// error.
type tlsConn struct {
	*zk.Conn
	mu      sync.Mutex
	lastErr error
}

// DialError implements DialErrorer.
func (c *tlsConn) DialError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// Compile-time check: go-zookeeper's client is a Conn.
var _ Conn = (*zk.Conn)(nil)
