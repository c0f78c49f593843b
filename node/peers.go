package node

import (
	"context"
	"fmt"

	"snowflaked/clockguard"
)

// newPeers registers the peer_offset check with the coordinator's alive
// znodes as the peer list (ZooKeeper mode only).
func (n *node) newPeers() error {
	src := clockguard.PeerSourceFunc(func(ctx context.Context) ([]clockguard.Peer, error) {
		live, err := n.coord.Peers(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]clockguard.Peer, len(live))
		for i, p := range live {
			out[i] = clockguard.Peer{WorkerID: p.WorkerID, Addr: p.Addr}
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
