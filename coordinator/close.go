package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"
)

// fixedFence is the Fencer of Close's final write: nothing is issued any
// more, so there is nothing to hand a fence to.
type fixedFence int64

func (f fixedFence) LastIssued() int64      { return int64(f) }
func (f fixedFence) SetZKFence(int64)       {}
func (f fixedFence) RaiseFloor(int64) error { return nil }

// Close shuts down gracefully: it stops Run (waiting for it, bounded by
// ctx), deletes alive/<id>, writes lastIssued as the fence of the forever
// znode (so a clean restart waits for nothing), deletes the lease and closes
// the session. lastIssued is the exact last issued timestamp in unix ms —
// pass the generator's LastUnixMilli after it stopped issuing (it also covers
// the fence the generator started after). lastIssued <= 0 leaves the last
// reported fence in place. The ZooKeeper steps run only while this process
// still holds the lease and has a session (otherwise the lease and alive
// znodes go with the session and the fence stays at the last report); the
// session is closed in every case. Calling Close again returns nil.
func (c *Coordinator) Close(ctx context.Context, lastIssued int64) error {
	c.mu.Lock()
	if c.st.closed {
		c.mu.Unlock()
		return nil
	}
	c.st.closed = true
	close(c.st.stop)
	done := c.st.runDone
	c.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			c.log.Warn().Msg("close: Run did not stop in time; closing anyway")
		}
	}
	conn := c.getConn()
	if conn == nil {
		return nil
	}
	defer conn.Close()
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()
	var errs []error
	held := st.leaseHeld && st.blocked == "" && conn.SessionID() == st.leaseSession
	if held && conn.State() != zk.StateHasSession {
		c.log.Warn().Msg("close: ZooKeeper unreachable; the lease and alive znodes go with the session, the fence stays at the last report")
		held = false
	}
	if held {
		z := zkc{conn, c.opTimeout}
		if err := c.deleteOwned(ctx, z, c.p.aliveNode(st.workerID), st.leaseSession); err != nil {
			errs = append(errs, err)
		}
		c.setAlive(false)
		if lastIssued > 0 {
			if err := c.renew(ctx, z, fixedFence(lastIssued), lastIssued); err != nil {
				errs = append(errs, fmt.Errorf("write the final fence: %w", err))
			} else {
				c.log.Info().Int64("fence", lastIssued).Str("forever", st.path).Msg("final fence written")
			}
		} else {
			c.log.Warn().Int64("last_issued", lastIssued).Msg("close: no last issued timestamp; keeping the last reported fence")
		}
		if err := c.deleteOwned(ctx, z, c.p.lease(st.workerID), st.leaseSession); err != nil {
			errs = append(errs, err)
		}
	}
	c.mu.Lock()
	c.st.leaseHeld, c.st.aliveOwned, c.st.leaseDetail = false, false, "coordinator closed"
	c.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("close coordinator: %w", errors.Join(errs...))
	}
	return nil
}

// deleteOwned deletes an ephemeral znode if this session owns it.
func (c *Coordinator) deleteOwned(ctx context.Context, z zkc, path string, session int64) error {
	ok, st, err := z.exists(ctx, path)
	if err != nil {
		return fmt.Errorf("look up %s: %w", path, err)
	}
	if !ok || st.EphemeralOwner != session {
		return nil
	}
	if err := z.delete(ctx, path, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete %s: %w", path, err)
	}
	return nil
}

// Peers lists the live nodes under alive/ other than this one, by worker
// ID. Malformed entries are skipped with a warning. Without a ZooKeeper
// session it fails at once with ErrZKUnavailable.
func (c *Coordinator) Peers(ctx context.Context) ([]Peer, error) {
	conn := c.getConn()
	if conn == nil || conn.State() != zk.StateHasSession {
		return nil, fmt.Errorf("list peers: %w: no ZooKeeper session", ErrZKUnavailable)
	}
	z := zkc{conn, c.opTimeout}
	names, err := z.children(ctx, c.p.alive)
	if err != nil {
		return nil, fmt.Errorf("list peers: %w", unavailable(err))
	}
	c.mu.Lock()
	self := c.st.workerID
	c.mu.Unlock()
	peers, err := readAlive(ctx, z, c.p, names, c.cfg.Layout.MaxWorkerID(), self, c.log)
	if err != nil {
		return nil, fmt.Errorf("list peers: %w", unavailable(err))
	}
	return peers, nil
}

// readAlive reads the alive/ entries named (children of alive/) as peers
// sorted by worker ID, leaving out worker ID skip (-1: none) and, with a
// warning, names and entries that do not parse.
func readAlive(ctx context.Context, z zkc, p paths, names []string, maxID, skip int64, log zerolog.Logger) ([]Peer, error) {
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
	got, err := z.getMany(ctx, paths)
	if err != nil {
		return nil, err
	}
	peers := []Peer{}
	for i, g := range got {
		if g == nil {
			continue
		}
		addr, err := decodeAlive(g.data)
		if err != nil {
			log.Warn().Err(err).Str("alive", paths[i]).Msg("skipping a malformed alive entry")
			continue
		}
		peers = append(peers, Peer{WorkerID: ids[i], Addr: addr})
	}
	slices.SortFunc(peers, func(a, b Peer) int { return int(a.WorkerID - b.WorkerID) })
	return peers, nil
}

// unavailable marks connection trouble as ErrZKUnavailable.
func unavailable(err error) error {
	if transient(err) && !errors.Is(err, ErrZKUnavailable) {
		return fmt.Errorf("%w: %w", ErrZKUnavailable, err)
	}
	return err
}
