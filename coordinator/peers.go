package coordinator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
)

// peerAddrMaxAge bounds how long an address read from alive/<id> is used
// without reading it again. Every change of alive/ drops them all (a worker
// ID may have moved to another address); an address changed in place is
// followed at once when the peer cannot be reached (ForgetPeer), else after
// this long.
const peerAddrMaxAge = 5 * time.Minute

// peerView is this node's picture of alive/: the worker IDs of the last
// listing, kept until a watch on alive/ says the list changed, and the
// addresses read for the peers the clock check asked. Its cost does not
// grow with the cluster: a round with no change costs no ZooKeeper request,
// a change one listing at the next round and a read of each address that
// round's sample needs.
type peerView struct {
	mu     sync.Mutex
	conn   zkconn.Conn // the connection the watch was set on
	gen    int64       // counts listings: a watch marks only its own stale
	listed bool        // ids hold a listing whose watch has not fired
	ids    []int64     // sorted, every live worker ID (this node's included)
	addrs  map[int64]peerAddr
}

// peerAddr is an address read from alive/<id>, and when.
type peerAddr struct {
	addr string
	read time.Time
}

// PeerIDs lists the worker IDs of the live nodes under alive/ other than
// this one, sorted. It lists alive/ only when the watch set by the last
// listing fired (or the connection changed); otherwise it answers from
// memory. Malformed names are skipped with a warning. Without a ZooKeeper
// session it fails at once with ErrZKUnavailable.
func (c *Coordinator) PeerIDs(ctx context.Context) ([]int64, error) {
	conn := c.getConn()
	if conn == nil || conn.State() != zk.StateHasSession {
		return nil, fmt.Errorf("list peers: %w: no ZooKeeper session", ErrZKUnavailable)
	}
	c.mu.Lock()
	self := c.st.workerID
	c.mu.Unlock()
	v := &c.peers
	v.mu.Lock()
	if v.listed && v.conn == conn {
		ids := without(v.ids, self)
		v.mu.Unlock()
		return ids, nil
	}
	v.mu.Unlock()
	z := zkclient.Client{Conn: conn, Timeout: c.opTimeout}
	names, ch, err := z.ChildrenW(ctx, c.p.alive)
	if err != nil {
		return nil, fmt.Errorf("list peers: %w", zkclient.Unavailable(err))
	}
	maxID := c.cfg.Layout.MaxWorkerID()
	ids := make([]int64, 0, len(names))
	for _, n := range names {
		id, err := parseWorkerName(n, maxID)
		if err != nil {
			c.log.Warn().Err(err).Str("dir", c.p.alive).Msg("skipping a znode that is not an alive entry")
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	v.mu.Lock()
	v.gen++
	gen := v.gen
	v.conn, v.listed, v.ids = conn, true, ids
	// alive/ changed since the last listing (or this is the first): any
	// worker ID may have moved to another process and address under the
	// same name, so every address is read again when next asked for (a
	// round's sample: O(sample) reads per change, none without one).
	clear(v.addrs)
	out := without(ids, self)
	v.mu.Unlock()
	go func() {
		<-ch // a change, or the session's end: the connection closes every watch
		v.mu.Lock()
		if v.gen == gen {
			v.listed = false
		}
		v.mu.Unlock()
	}()
	return out, nil
}

// without returns a copy of the sorted ids less id.
func without(ids []int64, id int64) []int64 {
	out := make([]int64, 0, len(ids))
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// PeerAddrs returns the peers among ids whose alive entries exist, with
// their addresses, sorted by worker ID: from memory when read within
// peerAddrMaxAge, else one read of alive/<id> each (all at once). A peer
// whose entry is gone or malformed (warned about) is left out.
func (c *Coordinator) PeerAddrs(ctx context.Context, ids []int64) ([]Peer, error) {
	conn := c.getConn()
	if conn == nil || conn.State() != zk.StateHasSession {
		return nil, fmt.Errorf("read peer addresses: %w: no ZooKeeper session", ErrZKUnavailable)
	}
	v := &c.peers
	now := time.Now()
	peers := make([]Peer, 0, len(ids))
	var miss []int64
	v.mu.Lock()
	gen := v.gen // a listing after this one drops what these reads find
	for _, id := range ids {
		if a, ok := v.addrs[id]; ok && now.Sub(a.read) < peerAddrMaxAge {
			peers = append(peers, Peer{WorkerID: id, Addr: a.addr})
			continue
		}
		miss = append(miss, id)
	}
	v.mu.Unlock()
	if len(miss) > 0 {
		z := zkclient.Client{Conn: conn, Timeout: c.opTimeout}
		paths := make([]string, len(miss))
		for i, id := range miss {
			paths[i] = c.p.aliveNode(id)
		}
		got, err := z.GetMany(ctx, paths)
		if err != nil {
			return nil, fmt.Errorf("read peer addresses: %w", zkclient.Unavailable(err))
		}
		v.mu.Lock()
		if v.addrs == nil {
			v.addrs = map[int64]peerAddr{}
		}
		for i, g := range got {
			if g == nil {
				delete(v.addrs, miss[i])
				continue
			}
			addr, err := decodeAlive(g.Data)
			if err != nil {
				c.log.Warn().Err(err).Str("alive", paths[i]).Msg("skipping a malformed alive entry")
				continue
			}
			if v.gen == gen {
				v.addrs[miss[i]] = peerAddr{addr: addr, read: now}
			}
			peers = append(peers, Peer{WorkerID: miss[i], Addr: addr})
		}
		v.mu.Unlock()
	}
	slices.SortFunc(peers, func(a, b Peer) int { return int(a.WorkerID - b.WorkerID) })
	return peers, nil
}

// ForgetPeer drops the address remembered for worker ID id (the peer could
// not be reached there): the next PeerAddrs that names it reads it again.
func (c *Coordinator) ForgetPeer(id int64) {
	v := &c.peers
	v.mu.Lock()
	delete(v.addrs, id)
	v.mu.Unlock()
}
