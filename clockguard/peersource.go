package clockguard

import (
	"context"
	"slices"
)

// PeerSource lists the live peers (the node itself excluded) and resolves
// the addresses of those a round asks. The coordinator implements it from
// ZooKeeper's alive znodes.
type PeerSource interface {
	// PeerIDs lists the live peers' worker IDs; cheap (the coordinator
	// serves it from a ZooKeeper watch).
	PeerIDs(ctx context.Context) ([]int64, error)
	// PeerAddrs returns those of ids still live, with addresses; a peer
	// gone meanwhile is left out.
	PeerAddrs(ctx context.Context, ids []int64) ([]Peer, error)
}

// peerForgetter is implemented by a PeerSource that caches addresses: the
// peer check calls ForgetPeer for every peer it could not reach, so the
// source reads that peer's address afresh the next time it is asked.
type peerForgetter interface {
	// ForgetPeer drops what the source remembers of the peer's address.
	ForgetPeer(workerID int64)
}

// StaticPeers is a fixed list of peers as a PeerSource (tests, static
// configurations).
type StaticPeers []Peer

// PeerIDs returns the worker IDs of the list.
func (s StaticPeers) PeerIDs(context.Context) ([]int64, error) { return peerIDs(s), nil }

// PeerAddrs returns the peers of the list whose worker ID is in ids.
func (s StaticPeers) PeerAddrs(_ context.Context, ids []int64) ([]Peer, error) {
	return peersIn(s, ids), nil
}

// peerListFunc adapts a function that lists the live peers with their
// addresses to PeerSource: both methods call it (PeerAddrs keeps those of
// the list whose worker ID it was asked for).
type peerListFunc func(ctx context.Context) ([]Peer, error)

// PeerIDs calls f and returns the worker IDs of its list.
func (f peerListFunc) PeerIDs(ctx context.Context) ([]int64, error) {
	peers, err := f(ctx)
	if err != nil {
		return nil, err
	}
	return peerIDs(peers), nil
}

// PeerAddrs calls f and returns the peers of its list whose worker ID is in
// ids.
func (f peerListFunc) PeerAddrs(ctx context.Context, ids []int64) ([]Peer, error) {
	peers, err := f(ctx)
	if err != nil {
		return nil, err
	}
	return peersIn(peers, ids), nil
}

// peerIDs returns the worker IDs of peers, in their order.
func peerIDs(peers []Peer) []int64 {
	ids := make([]int64, 0, len(peers))
	for _, p := range peers {
		ids = append(ids, p.WorkerID)
	}
	return ids
}

// peersIn returns the peers whose worker ID is in ids, in the order of
// peers.
func peersIn(peers []Peer, ids []int64) []Peer {
	out := make([]Peer, 0, len(ids))
	for _, p := range peers {
		if slices.Contains(ids, p.WorkerID) {
			out = append(out, p)
		}
	}
	return out
}
