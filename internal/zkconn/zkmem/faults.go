package zkmem

import (
	"bytes"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// The faults of this file: a request answered with zk.ErrSessionMoved, an
// answer delivered after its caller gave up, and a server that goes back
// to an older state (Snapshot, Restore). Their kinds are numbered apart
// from zkmem.go's.
const (
	// SessionMoved: the session moved to another server while the request
	// was on its way. The request is not applied (ZooKeeper's leader
	// refuses a request from a server that no longer owns the session),
	// its caller gets zk.ErrSessionMoved, and so does every request sent
	// before the reconnect on the same connection; the connection breaks
	// for Down and comes back on the same session (unless Down reaches the
	// session timeout).
	SessionMoved Kind = 16 + iota
	// LateAnswer: the request is applied at once (other sessions see it)
	// and its answer is held for Hold: a caller that bounds its wait
	// (zkclient.Call) gives up first and the answer arrives after. The
	// connection's later requests are answered after it, as ZooKeeper
	// answers one connection's requests in order.
	LateAnswer
)

// refuseLocked is the error of a request that is not applied because its
// fault (Drop or SessionMoved) breaks the connection numbered gen; a
// SessionMoved fails the requests behind it on that connection the same
// way (lostLocked).
func (c *Conn) refuseLocked(k Kind, gen int64) error {
	if k == SessionMoved {
		c.movedGen = gen
		return zk.ErrSessionMoved
	}
	return zk.ErrConnectionClosed
}

// lostLocked is the error of a request sent on the connection numbered gen
// that broke before the request was applied.
func (c *Conn) lostLocked(gen int64) error {
	if gen == c.movedGen {
		return zk.ErrSessionMoved
	}
	return zk.ErrConnectionClosed
}

// holdAnswer delivers the answer err of a request applied on the
// connection numbered gen after d (LateAnswer): zk.ErrConnectionClosed
// when the connection broke meanwhile (the answer is lost with it) or the
// client was closed (go-zookeeper fails its requests in flight so).
func (c *Conn) holdAnswer(d time.Duration, gen int64, err error) error {
	t := clock.NewTimer(c.srv.timers(), d)
	defer t.Stop()
	if !await(t.C, c.gone) {
		return zk.ErrConnectionClosed
	}
	c.srv.mu.Lock()
	defer c.srv.mu.Unlock()
	if c.gen != gen {
		return zk.ErrConnectionClosed
	}
	return err
}

// Snapshot is the server's tree at one moment (Server.Snapshot), to put
// back later with Server.Restore.
type Snapshot struct {
	nodes map[string]*znode
	zxid  int64
}

// Get returns a znode's data and version as the snapshot holds it, for
// checkers.
func (sn *Snapshot) Get(p string) ([]byte, int32, bool) {
	n := sn.nodes[p]
	if n == nil {
		return nil, 0, false
	}
	return slices.Clone(n.data), n.version, true
}

// Children lists a znode's children as the snapshot holds them (sorted),
// for checkers.
func (sn *Snapshot) Children(p string) []string {
	n := sn.nodes[p]
	if n == nil {
		return nil
	}
	return sortedKeys(n.children)
}

// Zxid is the last zxid the snapshot holds.
func (sn *Snapshot) Zxid() int64 { return sn.zxid }

// Snapshot captures the tree (every znode, with its versions and zxids).
func (s *Server) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Snapshot{nodes: cloneNodes(s.nodes), zxid: s.zxid}
}

// Zxid is the last zxid the server gave out.
func (s *Server) Zxid() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.zxid
}

// Restore puts the tree of sn back: the server forgets every write it
// acknowledged since, as Debian's ZooKeeper 3.8.0 was seen to do when its
// leader was killed while a restarted server was still syncing. A real
// ensemble forgets writes across a leader election, so:
//
//   - zxids never go back: the new leader's epoch is above every earlier
//     one (zxid = epoch<<32 | counter), so the next write's zxid is higher
//     than any given out before, and a znode created again gets a new
//     creation zxid, never the forgotten one's;
//   - every connection breaks for defaultDown (the election) and comes back
//     on its session: sessions live on; their ephemerals created since are
//     gone with the tree, and those of sessions that ended since go too
//     (the new leader expires a session nobody keeps alive; here at once);
//   - every watch on a znode that differs between the tree forgotten and
//     the one restored fires (NodeCreated, NodeDeleted, NodeDataChanged,
//     NodeChildrenChanged). A real server decides a reconnecting client's
//     watches by zxid (SetWatches) and may stay silent about a znode that
//     went back to an older version; a watch is a hint either way.
func (s *Server) Restore(sn *Snapshot) {
	s.mu.Lock()
	old := s.nodes
	s.nodes = cloneNodes(sn.nodes)
	var gone []string
	for p, n := range s.nodes {
		if n.owner != 0 && s.sessions[n.owner] == nil {
			gone = append(gone, p)
		}
	}
	slices.Sort(gone)
	t := &tree{s: s, nodes: s.nodes}
	for _, p := range slices.Backward(gone) {
		_ = t.delete(p, -1) // ephemerals have no children
	}
	s.zxid = (s.zxid>>32 + 1) << 32 // a new epoch
	for _, key := range s.watchKeysLocked() {
		if e, ok := resyncEvent(key, old[key.path], s.nodes[key.path]); ok {
			s.fireLocked(e, key.path, key)
		}
	}
	var afters []func()
	for _, id := range slices.Sorted(maps.Keys(s.sessions)) {
		afters = append(afters, s.sessions[id].breakLocked(defaultDown))
	}
	s.unlock()
	for _, f := range afters {
		f()
	}
}

// resyncEvent is the event a watch on key fires when its znode went from
// was to now (nil: missing), and whether it fires.
func resyncEvent(key watchKey, was, now *znode) (zk.EventType, bool) {
	switch {
	case was == nil && now == nil:
		return 0, false
	case now == nil:
		return zk.EventNodeDeleted, true
	case key.children && was != nil && !maps.Equal(was.children, now.children):
		return zk.EventNodeChildrenChanged, true
	case key.children:
		return 0, false
	case was == nil:
		return zk.EventNodeCreated, true
	case was.version != now.version || was.mzxid != now.mzxid || !bytes.Equal(was.data, now.data):
		return zk.EventNodeDataChanged, true
	}
	return 0, false
}

// cloneNodes copies a tree deeply enough that neither copy sees the
// other's writes.
func cloneNodes(in map[string]*znode) map[string]*znode {
	out := make(map[string]*znode, len(in))
	for p, n := range in {
		cp := *n
		cp.data = slices.Clone(n.data)
		cp.children = maps.Clone(n.children)
		out[p] = &cp
	}
	return out
}

// Rebuild replaces the server by a new, empty ensemble at the same
// address (ZooKeeper rebuilt after it lost its data): the tree holds only
// "/", zxids start again from the first, so a znode created again in the
// same order gets the same creation zxid as before, and every session
// expires (its client learns it at once and starts a new session after
// defaultDown). A real server refuses, until its own zxid passes it, a
// client that has seen a higher zxid; this one does not.
func (s *Server) Rebuild() {
	s.mu.Lock()
	var ids []int64
	for id := range s.sessions {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		s.Expire(id)
	}
	s.mu.Lock()
	defer s.unlock()
	for _, key := range s.watchKeysLocked() {
		if key.path != "/" {
			s.fireLocked(zk.EventNodeDeleted, key.path, key)
		}
	}
	s.nodes = map[string]*znode{"/": {children: map[string]uint64{}}}
	s.zxid = 0
}

// watchKeysLocked lists the keys with watches in a fixed order (path,
// then data before children), so that the events of one change go out in
// the same order on every run.
func (s *Server) watchKeysLocked() []watchKey {
	keys := slices.Collect(maps.Keys(s.watches))
	slices.SortFunc(keys, func(a, b watchKey) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		switch {
		case a.children == b.children:
			return 0
		case b.children:
			return -1
		}
		return 1
	})
	return keys
}
