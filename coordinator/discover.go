package coordinator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// Discovery follows a cluster's alive/ znodes, the nodes in service, for
// clients: it reports the list at once and again after every change, one
// ZooKeeper watch event later.
type Discovery struct {
	conn   zkconn.Conn
	cancel context.CancelFunc
	done   chan struct{}
	log    zerolog.Logger
}

// DiscoveryConfig says which cluster to follow.
type DiscoveryConfig struct {
	Servers []string // ZooKeeper "host:port" addresses
	Cluster string
	Auth    string // "user:password" or "" (reading needs no credentials)
	// Timeout bounds the wait for a first session and each ZooKeeper call
	// (default 10s).
	Timeout time.Duration
	Log     zerolog.Logger
}

// Discover connects to ZooKeeper, reads the cluster's live nodes and keeps
// following them until Close, calling onChange (never concurrently) with
// every new list, the first one before Discover returns. The cluster must
// exist. ZooKeeper trouble after the start is retried and logged; the last
// list stays in force meanwhile.
func Discover(ctx context.Context, cfg DiscoveryConfig, onChange func([]Peer)) (*Discovery, error) {
	z, p, err := dialCluster(ctx, cfg.Servers, cfg.Cluster, cfg.Auth, cfg.Timeout, cfg.Log, nil)
	if err != nil {
		return nil, fmt.Errorf("discover: %w", err)
	}
	conn := z.conn
	rctx, cancel := context.WithCancel(context.Background())
	d := &Discovery{conn: conn, cancel: cancel, done: make(chan struct{}), log: cfg.Log}
	peers, ch, err := listAlive(ctx, z, p, cfg.Log)
	if err != nil {
		cancel()
		conn.Close()
		return nil, fmt.Errorf("discover: %w", unavailable(err))
	}
	onChange(peers)
	go d.run(rctx, z, p, ch, onChange)
	return d, nil
}

// listAlive reads alive/ with a watch on its children.
func listAlive(ctx context.Context, z zkc, p paths, log zerolog.Logger) ([]Peer, <-chan zk.Event, error) {
	type res struct {
		names []string
		ch    <-chan zk.Event
	}
	r, err := call(ctx, z.timeout, func() (res, error) {
		names, _, ch, err := z.conn.ChildrenW(p.alive)
		return res{names, ch}, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", p.alive, err)
	}
	peers, err := readAlive(ctx, z, p, r.names, 1<<20, -1, log)
	if err != nil {
		return nil, nil, err
	}
	return peers, r.ch, nil
}

func (d *Discovery) run(ctx context.Context, z zkc, p paths, ch <-chan zk.Event, onChange func([]Peer)) {
	defer close(d.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		for attempt := 0; ; attempt++ {
			peers, next, err := listAlive(ctx, z, p, d.log)
			if err == nil {
				onChange(peers)
				ch = next
				break
			}
			if ctx.Err() != nil {
				return
			}
			if attempt == 0 {
				d.log.Warn().Err(err).Msg("discovery: cannot read the live nodes; keeping the last list and retrying")
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second)):
			}
		}
	}
}

// Close stops following and closes the session.
func (d *Discovery) Close() error {
	d.cancel()
	<-d.done
	d.conn.Close()
	return nil
}

// dialCluster is dialZK, then a check that the cluster exists. Readers
// beside the node (discovery, segment mode, snowflakectl segment) use it.
func dialCluster(ctx context.Context, servers []string, cluster, auth string, timeout time.Duration, log zerolog.Logger, dial zkconn.Dialer) (zkc, paths, error) {
	z, p, err := dialZK(ctx, servers, cluster, auth, timeout, log, dial)
	if err != nil {
		return zkc{}, paths{}, err
	}
	if ok, _, err := z.exists(ctx, p.cluster); err != nil || !ok {
		z.conn.Close()
		if err == nil {
			return zkc{}, paths{}, fmt.Errorf("cluster %q does not exist in ZooKeeper %s (start a node first)", cluster, strings.Join(servers, ","))
		}
		return zkc{}, paths{}, unavailable(err)
	}
	return z, p, nil
}

// dialZK checks the connection settings, opens a ZooKeeper session of its
// own (waiting up to timeout, default DefaultConnectTimeout) and adds the
// digest auth. The caller closes z.conn. A nil dial is zkconn.Dial.
func dialZK(ctx context.Context, servers []string, cluster, auth string, timeout time.Duration, log zerolog.Logger, dial zkconn.Dialer) (zkc, paths, error) {
	servers, err := checkServers(servers)
	if err != nil {
		return zkc{}, paths{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := validateCluster(cluster); err != nil {
		return zkc{}, paths{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if u, p, ok := strings.Cut(auth, ":"); auth != "" && (!ok || u == "" || p == "") {
		return zkc{}, paths{}, fmt.Errorf("%w: zk auth must be user:password", ErrInvalidConfig)
	}
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	if dial == nil {
		dial = zkconn.Dial
	}
	conn, err := dial(servers, zkconn.Options{SessionTimeout: max(timeout, 2*time.Second), Logger: zkLogger{log: log}})
	if err != nil {
		return zkc{}, paths{}, fmt.Errorf("%w: %v", ErrZKUnavailable, err)
	}
	if err := waitSession(ctx, conn, timeout, servers); err != nil {
		conn.Close()
		return zkc{}, paths{}, err
	}
	z := zkc{conn, timeout}
	if auth != "" {
		if _, err := call(ctx, timeout, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", []byte(auth)) }); err != nil {
			conn.Close()
			return zkc{}, paths{}, fmt.Errorf("auth: %w", unavailable(err))
		}
	}
	return z, newPaths(cluster), nil
}
