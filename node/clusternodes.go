package node

import (
	"net"
	"slices"

	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/coordinator"
)

// clusterNodes is the list GET /cluster/nodes answers: this node while it
// is in service, and in ZooKeeper mode the peers under alive/ as the peer
// check last read them (every --peer-interval; no ZooKeeper read of its
// own), in worker-ID order. local is the address the request came in on:
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
	if peers := n.alivePeers.Load(); peers != nil {
		for _, p := range *peers {
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
