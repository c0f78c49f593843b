package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// Admin is the operator's handle on a ZooKeeper ensemble: the commands
// behind snowflakectl cluster, node retire and status (CreateCluster,
// SetCluster, DeleteCluster, ListClusters, ListWorkers, ReadCluster,
// Retire, ListTombstones, PurgeTombstone) as its methods, each bounded by
// the handle's timeout.
//
// The handle holds one ZooKeeper session for its life: the first command
// opens it (within that command's context and timeout), the following
// ones use it, and Close ends it. A session that ZooKeeper expired is
// opened again by the next command. Nothing a command leaves behind
// belongs to the session (no ephemeral znode, no watch), and one session
// sees its own writes in order, so a command after another (a create
// after a delete, a list after a create) sees what the one before it did,
// as it would in a session of its own. A handle is safe for concurrent
// use.
type Admin struct {
	servers []string
	auth    string
	timeout time.Duration
	dial    zkconn.Dialer

	mu     sync.Mutex
	z      zkclient.Client // Conn nil until a command opens the session
	closed bool
}

// errAdminClosed: a command on an Admin after Close.
var errAdminClosed = errors.New("the admin handle is closed")

// NewAdmin returns a handle on the ZooKeeper ensemble of servers
// (host:port each), with auth "user:password" for digest ACLs ("" for
// none) and timeout bounding each command, connecting included; opts
// change how it reaches ZooKeeper (WithAdminDial: over TLS). It connects
// on the first command; Close it when done (its session stays open until
// then). A bad server address, auth or timeout is ErrInvalidConfig.
func NewAdmin(servers []string, auth string, timeout time.Duration, opts ...AdminOption) (*Admin, error) {
	var o adminOptions
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := zkclient.CheckServers(servers); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if u, p, ok := strings.Cut(auth, ":"); auth != "" && (!ok || u == "" || p == "") {
		return nil, fmt.Errorf("%w: zk auth must be user:password", ErrInvalidConfig)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%w: timeout %v is not positive", ErrInvalidConfig, timeout)
	}
	return &Admin{servers: servers, auth: auth, timeout: timeout, dial: o.dial}, nil
}

// Close ends the handle's session (if a command opened one); commands
// after it fail. Closing again does nothing.
func (a *Admin) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.z.Conn != nil {
		a.z.Conn.Close()
		a.z = zkclient.Client{}
	}
	a.closed = true
	return nil
}

// session checks cluster ("" for a command of the whole ensemble) as a
// cluster name and returns the handle's session, opening it within ctx
// when no command has yet or ZooKeeper expired it.
func (a *Admin) session(ctx context.Context, cluster string) (zkclient.Client, error) {
	if cluster != "" {
		if err := zkclient.ValidateCluster(cluster); err != nil {
			return zkclient.Client{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return zkclient.Client{}, errAdminClosed
	}
	if a.z.Conn != nil && a.z.Conn.State() != zk.StateExpired {
		return a.z, nil
	}
	if a.z.Conn != nil {
		a.z.Conn.Close()
		a.z = zkclient.Client{}
	}
	// The cluster Dial checks is only checked, never used: any valid name.
	z, err := zkclient.Dial(ctx, zkclient.Config{Servers: a.servers, Cluster: "default", Auth: a.auth, Timeout: a.timeout, Log: zerolog.Nop(), Dial: a.dial})
	if err != nil {
		return zkclient.Client{}, err
	}
	a.z = z
	return z, nil
}
