package node

import (
	"net"
	"slices"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// clusterNodes is the list GET /cluster/nodes answers: this node while it
// is in service, and in ZooKeeper mode the peers under alive/ as the peer
// check last read them (every --peer-interval), or as listedPeers reads
// them when that list is out of date in a small cluster, in worker-ID
// order. local is the address the request came in on:
// this node's address when it has none to advertise (standalone with
// --listen :8080).
func (n *node) clusterNodes(local net.Addr) []wire.ClusterNode {
	out := []wire.ClusterNode{}
	if n.guard.Ready() {
		self := n.advertise
		if self == "" {
			self = n.addr
			if !concreteHost(self) && local != nil {
				self = local.String()
			}
		}
		out = append(out, wire.ClusterNode{WorkerID: n.ident.entry.WorkerID, Addr: self})
	}
	if peers := n.listedPeers(); peers != nil {
		for _, p := range peers {
			if p.WorkerID != n.ident.entry.WorkerID {
				out = append(out, wire.ClusterNode{WorkerID: p.WorkerID, Addr: p.Addr})
			}
		}
	}
	slices.SortFunc(out, func(a, b wire.ClusterNode) int { return int(a.WorkerID - b.WorkerID) })
	return out
}

// sawPeers records the peers the peer check read under alive/.
func (n *node) sawPeers(peers []coordinator.Peer) {
	peers = slices.Clone(peers)
	n.alivePeers.Store(&peers)
}

// peersReadTimeout bounds listedPeers' read of new peers' addresses: past
// it, /cluster/nodes answers the peer check's last list.
const peersReadTimeout = time.Second

// listedPeers is the peers /cluster/nodes lists: the peer check's last
// read, unless the coordinator's watch on alive/ shows another set of live
// peers in a cluster the check lists whole (no more peers than
// --peer-sample). Then it reads the new peers' addresses (once: the
// coordinator caches them) and lists them, so a node started beside
// others (make run) lists them from its first seconds, not only after its
// next peer round, up to --peer-interval later. A larger cluster's list
// is a sample anyway, and stays the check's.
func (n *node) listedPeers() []coordinator.Peer {
	var last []coordinator.Peer
	if p := n.alivePeers.Load(); p != nil {
		last = *p
	}
	if n.coord == nil {
		return last
	}
	ctx, cancel := clock.WithTimeout(n.timers, peersReadTimeout)
	defer cancel()
	ids, err := n.coord.PeerIDs(ctx)
	if err != nil || len(ids) > n.cfg.PeerSample || sameWorkers(ids, last) {
		return last
	}
	live, err := n.coord.PeerAddrs(ctx, ids)
	if err != nil {
		return last
	}
	n.sawPeers(live)
	return live
}

// sameWorkers reports whether peers are exactly the workers ids.
func sameWorkers(ids []int64, peers []coordinator.Peer) bool {
	if len(ids) != len(peers) {
		return false
	}
	have := make(map[int64]bool, len(peers))
	for _, p := range peers {
		have[p.WorkerID] = true
	}
	for _, id := range ids {
		if !have[id] {
			return false
		}
	}
	return true
}
