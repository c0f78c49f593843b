package node

import (
	"context"
	"fmt"

	"codeberg.org/snowflaked/snowflaked/clockguard"
)

// newPeers registers the peer_offset check with the coordinator's alive
// znodes as the peer list (ZooKeeper mode only). The check counts this
// node's own clock as one of the clocks compared and takes it out only when
// it is the outlier (a strict majority of the clocks disagrees with it), so
// one bad clock never takes good nodes out: with two clocks that disagree
// both stay in, flagged, and NTP decides. Each list it reads is also what
// GET /cluster/nodes answers (clusterNodes).
func (n *node) newPeers() error {
	src := clockguard.PeerSourceFunc(func(ctx context.Context) ([]clockguard.Peer, error) {
		live, err := n.coord.Peers(ctx)
		if err != nil {
			return nil, err
		}
		n.sawPeers(live)
		out := make([]clockguard.Peer, 0, len(live))
		for _, p := range live {
			out = append(out, clockguard.Peer{WorkerID: p.WorkerID, Addr: p.Addr})
		}
		return out, nil
	})
	var err error
	n.peers, err = clockguard.NewPeers(n.guard, n.clock, src, clockguard.PeersConfig{
		Interval: n.cfg.PeerInterval, MaxOffset: n.cfg.PeerMaxOffset,
		Log: n.log.With().Str("component", "peers").Logger(),
		TLS: n.tls.peerConfig(),
	})
	if err != nil {
		return fmt.Errorf("peer clock check: %w", err)
	}
	n.loops = append(n.loops, n.peers.Run)
	return nil
}
