package coordinator

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fixedFence is the Fencer of Close's final write: nothing is issued any
// more, so there is nothing to hand a fence to.
type fixedFence snowflake.UnixMilli

func (f fixedFence) LastIssued() snowflake.UnixMilli      { return snowflake.UnixMilli(f) }
func (f fixedFence) SetZKFence(snowflake.UnixMilli)       {}
func (f fixedFence) RaiseFloor(snowflake.UnixMilli) error { return nil }

// Close shuts down gracefully: it stops Run (waiting for it, bounded by
// ctx), deletes alive/<id>, writes lastIssued as the fence of the forever
// znode (so a clean restart waits for nothing), deletes the lease and closes
// the session. lastIssued is the exact last issued timestamp —
// pass the generator's LastIssued after it stopped issuing (it also covers
// the fence the generator started after). lastIssued <= 0 leaves the last
// reported fence in place. The ZooKeeper steps run only while this process
// still holds the lease and has a session (otherwise the lease and alive
// znodes go with the session and the fence stays at the last report); the
// session is closed in every case. Calling Close again returns nil.
func (c *Coordinator) Close(ctx context.Context, lastIssued snowflake.UnixMilli) error {
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
			select {
			case <-done: // it stopped as the deadline came (select picks at random)
			default:
				c.log.Warn().Msg("close: Run did not stop in time; closing anyway")
			}
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
		z := zkclient.Client{Conn: conn, Timeout: c.opTimeout}
		if err := c.deleteOwned(ctx, z, c.p.aliveNode(st.workerID), st.leaseSession); err != nil {
			errs = append(errs, err)
		}
		c.setAlive(false)
		if lastIssued > 0 {
			if err := c.renew(ctx, z, fixedFence(lastIssued), lastIssued); err != nil {
				errs = append(errs, fmt.Errorf("write the final fence: %w", err))
			} else {
				c.log.Info().Int64("fence", int64(lastIssued)).Str("forever", st.path).Msg("final fence written")
			}
		} else {
			c.log.Warn().Int64("last_issued", int64(lastIssued)).Msg("close: no last issued timestamp; keeping the last reported fence")
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
func (c *Coordinator) deleteOwned(ctx context.Context, z zkclient.Client, path string, session int64) error {
	ok, st, err := z.Exists(ctx, path)
	if err != nil {
		return fmt.Errorf("look up %s: %w", path, err)
	}
	if !ok || st.EphemeralOwner != session {
		return nil
	}
	if err := z.Delete(ctx, path, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete %s: %w", path, err)
	}
	return nil
}
