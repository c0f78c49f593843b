// Package zkdiscovery finds a snowflaked cluster's nodes in ZooKeeper: a
// client.Discovery that follows the cluster's alive/ znodes.
//
// The znodes it reads are wire.AliveNode's,
// /snowflaked/<cluster>/alive/<worker-id>, each holding the address
// ("host:port") of a node in service. A node creates its alive znode
// (ephemeral) when it enters service and deletes it when it leaves, so the
// children of alive/ are exactly the nodes to call.
//
// It is a package of its own so that the client's core builds on the
// standard library alone: only a program that imports zkdiscovery gets the
// ZooKeeper client (github.com/go-zookeeper/zk).
package zkdiscovery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/client/zktls"
)

// connectTimeout bounds the wait for a first session and each read.
const connectTimeout = 10 * time.Second

// Config says where the cluster's znodes are.
type Config struct {
	// Servers lists the ZooKeeper servers, "host:port" each (required).
	Servers []string
	// Cluster is the cluster's name (default "default").
	Cluster string
	// Auth is "user:password" when the znodes are protected (digest).
	Auth string
	// TLS, when set, connects to ZooKeeper over TLS (its secureClientPort)
	// with these settings: RootCAs verify the server (against the host of
	// each server address unless ServerName is set), Certificates hold a
	// client certificate for mutual TLS. zktls.Load makes one from PEM
	// files. nil is plain TCP.
	TLS *tls.Config
	// Log receives a line per entry skipped and per failed re-read (Warn),
	// and the ZooKeeper client's lines (Debug); nil discards everything.
	Log *slog.Logger
}

// Discovery follows a cluster's alive/ znodes; it implements
// client.Discovery. Close it after the client that uses it.
type Discovery struct {
	conn   *zk.Conn
	dir    string
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	nodes   []string
	changed chan struct{}

	closeOnce sync.Once
}

// New connects to ZooKeeper, reads the live nodes, and keeps following them
// until Close. The cluster must exist. ctx bounds the connection and the
// first read. Trouble after the start is retried and logged; the last list
// stays in force meanwhile. A bad Config is an error wrapping
// client.ErrInvalidConfig.
func New(ctx context.Context, cfg Config) (*Discovery, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("zkdiscovery: %w: %s", client.ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	if len(cfg.Servers) == 0 {
		return nil, bad("give the ZooKeeper Servers")
	}
	for _, s := range cfg.Servers {
		if !isHostPort(s) {
			return nil, bad("ZooKeeper server %q is not host:port", s)
		}
	}
	if cfg.Cluster == "" {
		cfg.Cluster = "default"
	}
	if strings.ContainsAny(cfg.Cluster, "/ ") {
		return nil, bad("cluster %q contains '/' or a space", cfg.Cluster)
	}
	if u, p, ok := strings.Cut(cfg.Auth, ":"); cfg.Auth != "" && (!ok || u == "" || p == "") {
		return nil, bad("Auth must be user:password")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	servers := cfg.Servers
	var conn *zk.Conn
	var dialErr *lastError
	var err error
	if cfg.TLS != nil {
		dialErr = &lastError{}
		conn, _, err = zk.Connect(servers, connectTimeout, zk.WithLogger(zkLog{cfg.Log}), zk.WithDialer(dialErr.record(zktls.Dialer(cfg.TLS))))
	} else {
		conn, _, err = zk.Connect(servers, connectTimeout, zk.WithLogger(zkLog{cfg.Log}))
	}
	if err != nil {
		return nil, fmt.Errorf("zkdiscovery: connect to ZooKeeper %s: %w", strings.Join(servers, ","), err)
	}
	if err := waitSession(ctx, conn, servers, dialErr); err != nil {
		conn.Close()
		return nil, err
	}
	if cfg.Auth != "" {
		if err := conn.AddAuth("digest", []byte(cfg.Auth)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zkdiscovery: ZooKeeper auth: %w", err)
		}
	}
	rctx, cancel := context.WithCancel(context.Background())
	d := &Discovery{conn: conn, dir: wire.AlivePath(cfg.Cluster), log: cfg.Log, cancel: cancel, done: make(chan struct{}), changed: make(chan struct{})}
	if ok, _, err := conn.Exists(wire.ClusterPath(cfg.Cluster)); err != nil || !ok {
		cancel()
		conn.Close()
		if err == nil {
			return nil, fmt.Errorf("zkdiscovery: cluster %q does not exist in ZooKeeper %s (create it with snowflakectl cluster create)", cfg.Cluster, strings.Join(servers, ","))
		}
		return nil, fmt.Errorf("zkdiscovery: %w", err)
	}
	ch, err := d.list()
	if err != nil {
		cancel()
		conn.Close()
		return nil, err
	}
	go d.follow(rctx, ch)
	return d, nil
}

// Nodes returns the nodes in service, in worker-ID order, and a channel
// closed at the next change (see client.Discovery).
func (d *Discovery) Nodes() ([]string, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.nodes), d.changed
}

// waitSession waits up to connectTimeout for a session; its error names
// why the last connection attempt failed when dialErr (nil: not recorded)
// knows.
func waitSession(ctx context.Context, conn *zk.Conn, servers []string, dialErr *lastError) error {
	const every = 20 * time.Millisecond
	deadline := time.Now().Add(connectTimeout)
	for conn.State() != zk.StateHasSession {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("zkdiscovery: no ZooKeeper session with %s within %v (state %v)%s", strings.Join(servers, ","), connectTimeout, conn.State(), dialErr.suffix())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zkdiscovery: waiting for a ZooKeeper session with %s: %w%s", strings.Join(servers, ","), ctx.Err(), dialErr.suffix())
		case <-time.After(every):
		}
	}
	return nil
}

// lastError remembers the error of the last connection attempt.
type lastError struct {
	mu  sync.Mutex
	err error
}

// record wraps dial to remember each attempt's error.
func (l *lastError) record(dial zktls.DialFunc) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := dial(network, address, timeout)
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		return c, err
	}
}

// suffix is ": last attempt: <why>" after a failed attempt, else "".
func (l *lastError) suffix() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		return ""
	}
	return ": last attempt: " + l.err.Error()
}

// list reads alive/ with a watch on its children and records the list.
func (d *Discovery) list() (<-chan zk.Event, error) {
	names, _, ch, err := d.conn.ChildrenW(d.dir)
	if err != nil {
		return nil, fmt.Errorf("zkdiscovery: list %s: %w", d.dir, err)
	}
	var addrs []string
	var ids []int64
	for _, name := range names {
		id, ok := wire.ParseAliveName(name)
		if !ok {
			d.log.Warn("snowflaked client: skipping a znode that is not an alive entry", "znode", d.dir+"/"+name)
			continue
		}
		data, _, err := d.conn.Get(d.dir + "/" + name)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue // left between the list and the read
		case err != nil:
			return nil, fmt.Errorf("zkdiscovery: read %s/%s: %w", d.dir, name, err)
		}
		if !isHostPort(string(data)) {
			d.log.Warn("snowflaked client: skipping an alive entry that is not host:port", "znode", d.dir+"/"+name)
			continue
		}
		addrs, ids = append(addrs, string(data)), append(ids, id)
	}
	// In worker-ID order, so every client walks the nodes alike.
	idx := make([]int, len(addrs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(ids[a] - ids[b]) })
	sorted := make([]string, len(addrs))
	for i, j := range idx {
		sorted[i] = addrs[j]
	}
	d.mu.Lock()
	if !slices.Equal(sorted, d.nodes) {
		d.nodes = sorted
		close(d.changed)
		d.changed = make(chan struct{})
	}
	d.mu.Unlock()
	return ch, nil
}

// follow re-reads the list after every watch event, retrying with a
// growing pause while ZooKeeper is out of reach.
func (d *Discovery) follow(ctx context.Context, ch <-chan zk.Event) {
	defer close(d.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		for attempt := 0; ; attempt++ {
			next, err := d.list()
			if err == nil {
				ch = next
				break
			}
			if attempt == 0 {
				d.log.Warn("snowflaked client: cannot read the live nodes; keeping the last list and retrying", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)):
			}
		}
	}
}

var _ client.Discovery = (*Discovery)(nil)

// Close stops following and ends the session. The last list stays what
// Nodes returns. It always returns nil.
func (d *Discovery) Close() error {
	d.closeOnce.Do(func() {
		d.cancel()
		d.conn.Close() // unblocks a read in flight
		<-d.done
	})
	return nil
}

// isHostPort reports whether s is a host:port address.
func isHostPort(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && strconv.Itoa(p) == port && p > 0 && p < 65536
}

// zkLog sends go-zookeeper's lines to the logger at level Debug.
type zkLog struct{ log *slog.Logger }

func (l zkLog) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "zk-client")
}
