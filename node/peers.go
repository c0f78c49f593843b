package node

import (
	"context"
	"fmt"

	"snowflaked/clockguard"
)

// newPeers registers the peer_offset check with the coordinator's alive
// znodes as the peer list (ZooKeeper mode only).
//
// The node counts itself as one of the peers (its own GET /time at its
// advertised address, offset ≈ 0). Without that vote, one node with a bad
// clock in a 3-node cluster takes the two good ones out of service (each
// sees offsets 0 and +3s: median +1.5s), and since only nodes in service are
// listed under alive/, the bad node then finds no peer to disagree with and
// stays in service alone (seen with a chaos build). With it, the good nodes
// see 0, 0, +3s (median 0) and the bad one sees 0, −3s, −3s (median −3s).
// A self that cannot be reached simply does not count.
func (n *node) newPeers() error {
	self := clockguard.Peer{WorkerID: n.ident.entry.WorkerID, Addr: n.advertise}
	src := clockguard.PeerSourceFunc(func(ctx context.Context) ([]clockguard.Peer, error) {
		live, err := n.coord.Peers(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]clockguard.Peer, 0, len(live)+1)
		for _, p := range live {
			out = append(out, clockguard.Peer{WorkerID: p.WorkerID, Addr: p.Addr})
		}
		if len(out) > 0 {
			out = append(out, self)
		}
		return out, nil
	})
	var err error
	n.peers, err = clockguard.NewPeers(n.guard, n.clock, src, clockguard.PeersConfig{
		Interval: n.cfg.PeerInterval, MaxOffset: n.cfg.PeerMaxOffset,
		Log: n.log.With().Str("component", "peers").Logger(),
	})
	if err != nil {
		return fmt.Errorf("peer clock check: %w", err)
	}
	n.loops = append(n.loops, n.peers.Run)
	return nil
}
