package node

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"codeberg.org/snowflaked/snowflaked/clockguard"
)

// newPeers registers the peer_offset check with the coordinator's alive
// znodes as the peer list (ZooKeeper mode only). The check counts this
// node's own clock as one of the clocks compared and takes it out only when
// it is the outlier (a strict majority of the clocks of its sample
// disagrees with it, confirmed by a second sample when the first did not
// hold every live peer), so one bad clock never takes good nodes out: with
// two clocks that disagree both stay in, flagged, and NTP decides. Each
// list it reads is also what GET /cluster/nodes answers (clusterNodes).
func (n *node) newPeers() error {
	var err error
	n.peers, err = clockguard.NewPeers(n.guard, n.clock, coordPeers{n}, clockguard.PeersConfig{
		Interval: n.cfg.PeerInterval, MaxOffset: n.cfg.PeerMaxOffset, Sample: n.cfg.PeerSample,
		Rand: n.peerRand(),
		Log:  n.log.With().Str("component", "peers").Logger(),
		TLS:  n.tls.peerConfig(),
	})
	if err != nil {
		return fmt.Errorf("peer clock check: %w", err)
	}
	n.loops = append(n.loops, n.peers.Run)
	return nil
}

// peerRand seeds the peer check's samples and jitter from the node key and
// the start time on the node's clock: nodes, and restarts of one node,
// choose differently, and a simulation (a virtual clock) replays.
func (n *node) peerRand() *rand.Rand {
	h := fnv.New64a()
	_, _ = h.Write([]byte(n.cfg.nodeKeyFor(n.advertise)))
	return rand.New(rand.NewPCG(h.Sum64(), uint64(n.clock.WallNanos())^uint64(n.clock.Mono())))
}

// coordPeers is the coordinator as the peer check's PeerSource: the live
// worker IDs from its watch on alive/, the addresses of a round's sample
// read (and cached) for those only, and forgotten when unreachable.
type coordPeers struct{ n *node }

// PeerIDs lists the live peers' worker IDs.
func (c coordPeers) PeerIDs(ctx context.Context) ([]int64, error) {
	return c.n.coord.PeerIDs(ctx)
}

// PeerAddrs returns those of ids still live, with their addresses, and
// records them for GET /cluster/nodes: the peers the check last asked,
// every live peer in a cluster no larger than --peer-sample.
func (c coordPeers) PeerAddrs(ctx context.Context, ids []int64) ([]clockguard.Peer, error) {
	live, err := c.n.coord.PeerAddrs(ctx, ids)
	if err != nil {
		return nil, err
	}
	c.n.sawPeers(live)
	out := make([]clockguard.Peer, 0, len(live))
	for _, p := range live {
		out = append(out, clockguard.Peer{WorkerID: p.WorkerID, Addr: p.Addr})
	}
	return out, nil
}

// ForgetPeer makes the coordinator read the peer's address again.
func (c coordPeers) ForgetPeer(workerID int64) { c.n.coord.ForgetPeer(workerID) }
