package coordinator

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
)

// Peers lists the live nodes under alive/ other than this one, by worker
// ID. Malformed entries are skipped with a warning. Without a ZooKeeper
// session it fails at once with ErrZKUnavailable.
func (c *Coordinator) Peers(ctx context.Context) ([]Peer, error) {
	conn := c.getConn()
	if conn == nil || conn.State() != zk.StateHasSession {
		return nil, fmt.Errorf("list peers: %w: no ZooKeeper session", ErrZKUnavailable)
	}
	z := zkclient.Client{Conn: conn, Timeout: c.opTimeout}
	names, err := z.Children(ctx, c.p.alive)
	if err != nil {
		return nil, fmt.Errorf("list peers: %w", zkclient.Unavailable(err))
	}
	c.mu.Lock()
	self := c.st.workerID
	c.mu.Unlock()
	peers, err := readAlive(ctx, z, c.p, names, c.cfg.Layout.MaxWorkerID(), self, c.log)
	if err != nil {
		return nil, fmt.Errorf("list peers: %w", zkclient.Unavailable(err))
	}
	return peers, nil
}

// readAlive reads the alive/ entries named (children of alive/) as peers
// sorted by worker ID, leaving out worker ID skip (-1: none) and, with a
// warning, names and entries that do not parse.
func readAlive(ctx context.Context, z zkclient.Client, p paths, names []string, maxID, skip int64, log zerolog.Logger) ([]Peer, error) {
	var ids []int64
	var paths []string
	for _, n := range names {
		id, err := parseWorkerName(n, maxID)
		if err != nil {
			log.Warn().Err(err).Str("dir", p.alive).Msg("skipping a znode that is not an alive entry")
			continue
		}
		if id == skip {
			continue
		}
		ids = append(ids, id)
		paths = append(paths, p.aliveNode(id))
	}
	got, err := z.GetMany(ctx, paths)
	if err != nil {
		return nil, err
	}
	peers := []Peer{}
	for i, g := range got {
		if g == nil {
			continue
		}
		addr, err := decodeAlive(g.Data)
		if err != nil {
			log.Warn().Err(err).Str("alive", paths[i]).Msg("skipping a malformed alive entry")
			continue
		}
		peers = append(peers, Peer{WorkerID: ids[i], Addr: addr})
	}
	slices.SortFunc(peers, func(a, b Peer) int { return int(a.WorkerID - b.WorkerID) })
	return peers, nil
}
