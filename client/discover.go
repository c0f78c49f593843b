package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// zkConnectTimeout bounds the wait for a first session and each read.
const zkConnectTimeout = 10 * time.Second

// discovery follows a cluster's alive/ znodes and calls onChange (never
// concurrently) with every new list, the first one before it returns.
//
// The znodes it reads are wire.AliveNode's,
// /snowflaked/<cluster>/alive/<worker-id>, each holding the address
// ("host:port") of a node in service. A node creates its alive znode
// (ephemeral) when it enters service and deletes it when it leaves, so the
// children of alive/ are exactly the nodes to call.
type discovery struct {
	conn      *zk.Conn
	dir       string
	log       *slog.Logger
	onChange  func([]string)
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// discover connects to ZooKeeper, reads the live nodes, and keeps
// following them until close. The cluster must exist. Trouble after the
// start is retried and logged; the last list stays in force meanwhile.
func discover(ctx context.Context, servers []string, cluster, auth string, log *slog.Logger, onChange func([]string)) (*discovery, error) {
	conn, _, err := zk.Connect(servers, zkConnectTimeout, zk.WithLogger(zkLog{log}))
	if err != nil {
		return nil, fmt.Errorf("discovery: connect to ZooKeeper %s: %w", strings.Join(servers, ","), err)
	}
	if err := waitSession(ctx, conn, servers); err != nil {
		conn.Close()
		return nil, err
	}
	if auth != "" {
		if err := conn.AddAuth("digest", []byte(auth)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("discovery: ZooKeeper auth: %w", err)
		}
	}
	rctx, cancel := context.WithCancel(context.Background())
	d := &discovery{conn: conn, dir: wire.AlivePath(cluster), log: log, onChange: onChange, cancel: cancel, done: make(chan struct{})}
	if ok, _, err := conn.Exists(wire.ClusterPath(cluster)); err != nil || !ok {
		cancel()
		conn.Close()
		if err == nil {
			return nil, fmt.Errorf("discovery: cluster %q does not exist in ZooKeeper %s (create it with snowflakectl cluster create)", cluster, strings.Join(servers, ","))
		}
		return nil, fmt.Errorf("discovery: %w", err)
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

// waitSession waits up to zkConnectTimeout for a session.
func waitSession(ctx context.Context, conn *zk.Conn, servers []string) error {
	const every = 20 * time.Millisecond
	deadline := time.Now().Add(zkConnectTimeout)
	for conn.State() != zk.StateHasSession {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("discovery: no ZooKeeper session with %s within %v (state %v)", strings.Join(servers, ","), zkConnectTimeout, conn.State())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("discovery: waiting for a ZooKeeper session with %s: %w", strings.Join(servers, ","), ctx.Err())
		case <-time.After(every):
		}
	}
	return nil
}

// list reads alive/ with a watch on its children and reports the list.
func (d *discovery) list() (<-chan zk.Event, error) {
	names, _, ch, err := d.conn.ChildrenW(d.dir)
	if err != nil {
		return nil, fmt.Errorf("discovery: list %s: %w", d.dir, err)
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
			return nil, fmt.Errorf("discovery: read %s/%s: %w", d.dir, name, err)
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
	d.onChange(sorted)
	return ch, nil
}

// follow re-reads the list after every watch event, retrying with a
// growing pause while ZooKeeper is out of reach.
func (d *discovery) follow(ctx context.Context, ch <-chan zk.Event) {
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

// close stops following and ends the session.
func (d *discovery) close() {
	d.closeOnce.Do(func() {
		d.cancel()
		d.conn.Close() // unblocks a read in flight
		<-d.done
	})
}

// zkLog sends go-zookeeper's lines to the client's logger at debug level.
type zkLog struct{ log *slog.Logger }

func (l zkLog) Printf(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "zk-client")
}
