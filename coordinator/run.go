package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Run keeps the node's presence in ZooKeeper until ctx ends or Close is
// called: every ReportInterval it renews the ZooKeeper fence to now + G
// (version-checked with this process's fencing token, last_ts in the same
// write) and hands each acknowledged fence to fencer; it re-creates the
// lease after a session expiry (never displacing another holder), keeps
// alive/<id> present exactly while the guard is in service, drives the
// lease_lost and zk_fence checks, and, after ResumeFromCache, keeps trying
// ZooKeeper and takes the lease once the mapping is confirmed (claiming
// afresh if another token holds it). ZooKeeper trouble is retried, logged
// and counted, never returned. Run returns an error only when misused
// (before Attach, before Claim/ResumeFromCache, while another Run is
// active, or after Close).
func (c *Coordinator) Run(ctx context.Context, fencer Fencer) error {
	if fencer == nil {
		return errors.New("coordinator run: nil fencer")
	}
	_, _, g := c.checks()
	c.guardMu.Lock()
	sub := c.guardSub
	c.guardMu.Unlock()
	c.mu.Lock()
	switch {
	case g == nil:
		c.mu.Unlock()
		return errors.New("coordinator run: Attach a guard first")
	case c.st.mode == modeNone:
		c.mu.Unlock()
		return errors.New("coordinator run: Claim or ResumeFromCache first")
	case c.st.running:
		c.mu.Unlock()
		return errors.New("coordinator run: already running")
	case c.st.closed:
		c.mu.Unlock()
		return errors.New("coordinator run: closed")
	}
	c.st.running = true
	done := make(chan struct{})
	c.st.runDone = done
	stop := c.st.stop
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.st.running = false
		c.mu.Unlock()
		close(done)
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := clock.NewTicker(ctx, c.resyncEvery)
	defer tick.Stop()
	c.mu.Lock()
	acked := c.st.acked
	c.mu.Unlock()
	fencer.SetZKFence(acked) // what Claim or the cache granted
	r := runner{c: c, fence: fencer, guard: g}
	for {
		r.step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-c.wake:
		case <-sub:
		case <-tick.C:
		}
		if ctx.Err() != nil { // an end that came with it wins (select picks at random)
			return nil
		}
		// The next step answers every signal pending now (one that comes
		// during the step starts the next one).
		clock.Drain(c.wake)
		clock.Drain(sub)
		clock.Drain(tick.C)
	}
}

// runner is Run's loop state (owned by the Run goroutine).
type runner struct {
	c          *Coordinator
	fence      Fencer
	guard      *health.Guard
	nextReport time.Time // zero: report at once
	nextResync time.Time
	warnedAt   time.Time // last "alive held by another session" warning
	lastWarn   string    // last lease/connection warning, logged again only when it changes
}

// warnOnce logs msg at warn level unless it repeats the previous warning.
func (r *runner) warnOnce(msg string, err error) {
	key := msg
	if err != nil {
		key += ": " + err.Error()
	}
	if key == r.lastWarn {
		return
	}
	r.lastWarn = key
	r.c.log.Warn().Err(err).Msg(msg)
}

func (r *runner) step(ctx context.Context) {
	c := r.c
	conn, err := c.dial()
	if err != nil {
		r.warnOnce("cannot set up the ZooKeeper connection; retrying", err)
		c.updateChecks(false)
		return
	}
	z := zkclient.Client{Conn: conn, Timeout: c.opTimeout}
	connected := conn.State() == zk.StateHasSession
	sid := conn.SessionID()

	c.mu.Lock()
	lost, old := c.st.leaseHeld && sid != c.st.leaseSession, c.st.leaseSession
	if lost {
		c.st.leaseHeld, c.st.aliveOwned = false, false
		c.st.leaseDetail = fmt.Sprintf("ZooKeeper session %s expired: the lease and alive znodes are gone; re-creating the lease", sessionHex(old))
	}
	c.mu.Unlock()
	if lost {
		c.log.Warn().Str("old_session", sessionHex(old)).Str("new_session", sessionHex(sid)).
			Msg("ZooKeeper session expired: lease lost, re-creating it")
		c.updateChecks(connected)
	}

	now := time.Now()
	resync := !now.Before(r.nextResync)
	if resync {
		r.nextResync = now.Add(aliveResyncRounds * c.resyncEvery)
	}
	if !connected && ctx.Err() == nil && !now.Before(r.nextReport) {
		r.nextReport = now.Add(c.cfg.ReportInterval)
		c.mu.Lock()
		due := c.st.mode == modeClaimed || c.st.verified
		c.mu.Unlock()
		if due {
			c.recordRenewFailure("connection", noSessionDetail(conn.State()))
		}
	}
	if connected && ctx.Err() == nil {
		if err := c.ensureAuth(ctx, conn); err != nil {
			r.warnOnce("ZooKeeper auth failed; retrying", err)
		} else {
			r.ensureLease(ctx, z, sid)
			c.mu.Lock()
			held := c.st.leaseHeld && c.st.blocked == ""
			c.mu.Unlock()
			if held && !now.Before(r.nextReport) {
				r.nextReport = now.Add(c.cfg.ReportInterval)
				if c.holdRenewals != nil && c.holdRenewals() {
					c.recordRenewFailure("held", "the node's clock jumped forward and is not confirmed yet")
				} else {
					reason := ""
					if st := r.guard.Status(); st.State != health.InService {
						reason = string(st.Reason)
					}
					c.mu.Lock()
					c.st.reason = reason
					c.mu.Unlock()
					_ = c.renew(ctx, z, r.fence, 0) // failures are counted and feed zk_fence
				}
			}
		}
		r.reconcileAlive(ctx, z, sid, resync)
	}
	c.updateChecks(connected)
}

// ensureLease (re)takes the lease when it is not held; after
// ResumeFromCache it first checks that ZooKeeper still maps this node key to
// the cached worker ID, and claims afresh when another token holds it.
func (r *runner) ensureLease(ctx context.Context, z zkclient.Client, sid int64) {
	c := r.c
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()
	if st.leaseHeld || st.blocked != "" {
		return
	}
	if !st.verified {
		if err := c.verifyResumed(ctx, z); err != nil {
			r.warnOnce("cannot confirm the cached worker ID in ZooKeeper yet; retrying", err)
			return
		}
		c.mu.Lock()
		st = c.st
		c.mu.Unlock()
		if st.blocked != "" {
			return
		}
	}
	node := &foreverNode{path: st.path, version: st.version, data: st.data, workerID: st.workerID}
	token := st.token // a re-lease: the znode carries it, a version check suffices
	if st.reclaim {
		token = st.reclaimToken // another token holds it: claim afresh, with one token for every attempt
	}
	written, first, err := c.claimOp(node, token)
	if err != nil {
		c.block(err.Error())
		return
	}
	a, err := c.tryLease(ctx, z, node, first, 0)
	if err != nil {
		c.setLeaseDetail(fmt.Sprintf("re-creating the lease on worker ID %d: %v", st.workerID, err))
		r.warnOnce(fmt.Sprintf("re-creating the lease on worker ID %d failed; retrying", st.workerID), err)
		return
	}
	switch a.res {
	case leaseTaken:
		if st.reclaim && !r.completeReclaim(st.workerID, token, &written) {
			return
		}
		c.mu.Lock()
		c.st.leaseHeld, c.st.leaseSession, c.st.leaseDetail = true, a.session, ""
		c.mu.Unlock()
		r.lastWarn = ""
		r.nextReport = time.Time{} // renew at once
		c.log.Info().Int64("worker_id", st.workerID).Str("session", sessionHex(a.session)).Msg("lease (re)established")
	case leaseNodeChanged:
		if st.reclaim {
			r.reclaimChanged(ctx, z, st.path, st.workerID, token)
			return
		}
		c.recheckOwn(ctx, z)
	case leaseRetry:
	case leaseHeldByOurKey, leaseHeldByOther:
		if !st.reclaim { // is the holder one that claimed our worker ID from us?
			if err := c.recheckOwn(ctx, z); err == nil && c.isBlocked() {
				return
			}
		}
		d := fmt.Sprintf("worker ID %d is leased by %s; waiting for it to go away (never displacing a live holder)", st.workerID, a.holder)
		c.setLeaseDetail(d)
		r.warnOnce("cannot re-create the lease: "+d, nil)
	}
}

// completeReclaim makes a re-claim's write (token on the forever znode,
// with the previous holder's fence) the coordinator's: the generator's floor
// goes up to the previous holder's fence before the new token's fence lets
// anything past it. It reports false (and blocks) when the floor cannot
// rise.
func (r *runner) completeReclaim(workerID int64, token string, written *foreverNode) bool {
	c := r.c
	floor := written.data.PrevFence
	if mutation.Broken(mutation.ReclaimSkipsFloor) {
		floor = 0
	}
	if err := r.fence.RaiseFloor(floor); err != nil {
		c.block(fmt.Sprintf("claimed worker ID %d again, but cannot start after the previous holder's fence %d: %v", workerID, written.data.PrevFence, err))
		return false
	}
	c.mu.Lock()
	c.st.token, c.st.acked, c.st.reclaim, c.st.reclaimToken = token, written.data.Fence, false, ""
	c.st.version, c.st.data = written.version, written.data
	c.mu.Unlock()
	r.fence.SetZKFence(written.data.Fence)
	c.log.Warn().Int64("worker_id", workerID).Int64("prev_fence", int64(written.data.PrevFence)).Str("prev_token", written.data.PrevToken).
		Msg("claimed the worker ID afresh: another process had claimed it while this one served from its cache; issuing only after its fence")
	return true
}

// stopping reports whether err comes from the process stopping (ctx ended,
// the client closing), which says nothing about ZooKeeper's data.
func stopping(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, zk.ErrClosing)
}

// reclaimChanged handles a re-claim attempt that found our forever znode
// at another version. Another process's token there is what a re-claim
// expects (it may have renewed since we read it): the next attempt claims
// over the record as it is now. Our own token there means an earlier
// attempt committed with its answer lost: the claim is completed. A read
// that fails for connection trouble is retried at the next step, never
// judged (a read that succeeds later must see our token as ours).
func (r *runner) reclaimChanged(ctx context.Context, z zkclient.Client, path string, workerID int64, token string) {
	c := r.c
	own, err := c.readOwn(ctx, z, path)
	var me *malformedError
	switch {
	case errors.Is(err, zk.ErrNoNode):
		c.block(fmt.Sprintf("forever znode %s of worker ID %d was deleted", path, workerID))
	case errors.As(err, &me):
		c.block(fmt.Sprintf("worker ID %d: %v", workerID, err))
	case err != nil:
		r.warnOnce(fmt.Sprintf("re-reading the forever znode of worker ID %d failed; retrying", workerID), err)
	case own.workerID != workerID:
		c.block(fmt.Sprintf("forever znode %s now maps to worker ID %d instead of %d (taken over by %s)", path, own.workerID, workerID, own.data.RecycledTo))
	case own.data.Token == token:
		r.completeReclaim(workerID, token, own) // the lease: the next attempt finds it ours, or takes it
	default:
		c.mu.Lock()
		c.st.version, c.st.data = own.version, own.data
		c.mu.Unlock()
	}
}

// readOwn reads this node key's forever znode at path.
func (c *Coordinator) readOwn(ctx context.Context, z zkclient.Client, path string) (*foreverNode, error) {
	key, seq, err := parseForeverName(path[len(c.p.forever)+1:])
	if err != nil {
		return nil, err
	}
	return c.readForever(ctx, z, path[len(c.p.forever)+1:], key, seq)
}

func (c *Coordinator) setLeaseDetail(d string) {
	c.mu.Lock()
	c.st.leaseDetail = d
	c.mu.Unlock()
}

// isBlocked reports whether block was called.
func (c *Coordinator) isBlocked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.blocked != ""
}

// block makes lease_lost fail for good with reason d.
func (c *Coordinator) block(d string) {
	c.mu.Lock()
	c.st.blocked = d
	c.mu.Unlock()
	c.log.Error().Str("reason", d).Msg("lease cannot be held: out of service until restarted")
}

// verifyResumed checks, after ResumeFromCache, the cluster's incarnation and
// layout and that this node key's forever znode maps to the cached worker
// ID. With the cached token still there the node carries on as its owner
// (the fence there was acknowledged for it); with another token it must
// claim afresh (reclaim). A definite mismatch blocks the lease; connection
// trouble is returned.
func (c *Coordinator) verifyResumed(ctx context.Context, z zkclient.Client) error {
	c.mu.Lock()
	want, token, cachedInc := c.st.workerID, c.st.token, c.st.incarnation
	c.mu.Unlock()
	cd, err := c.ensureCluster(ctx, z)
	if err != nil {
		if zkclient.Transient(err) || stopping(ctx, err) {
			return err
		}
		c.block(fmt.Sprintf("serving cached worker ID %d, but the cluster in ZooKeeper does not fit: %v", want, err))
		return nil
	}
	if err := checkIncarnation(c.cfg.Cluster, cd.Incarnation, Prior{Incarnation: cachedInc}); err != nil {
		c.block(fmt.Sprintf("serving cached worker ID %d: %v", want, err))
		return nil
	}
	own, err := c.findOwn(ctx, z)
	switch {
	case err != nil && (retryable(err) || stopping(ctx, err)):
		return err
	case err != nil:
		c.block(fmt.Sprintf("serving cached worker ID %d, but this node key's forever znode cannot be used: %v", want, err))
		return nil
	case own == nil:
		c.block(fmt.Sprintf("serving cached worker ID %d, but ZooKeeper has no forever znode for node key %q (the worker ID was recycled to another node key and the znode reaped, or it was deleted by hand): refusing to take a lease (move the cache file away to claim a fresh worker ID)", want, c.cfg.NodeKey))
		return nil
	case own.workerID != want:
		c.block(fmt.Sprintf("serving cached worker ID %d, but forever znode %s maps node key %q to worker ID %d (-1: none; it was recycled?): refusing to take a lease",
			want, own.path, c.cfg.NodeKey, own.workerID))
		return nil
	}
	mine := fencing.Adopt(own.workerID, want, own.data.Token, token)
	c.mu.Lock()
	c.st.verified, c.st.path, c.st.version, c.st.data, c.st.incarnation = true, own.path, own.version, own.data, cd.Incarnation
	c.st.reclaim = !mine
	if !mine && c.st.reclaimToken == "" {
		c.st.reclaimToken = zkclient.NewToken()
	}
	if mine {
		c.st.acked = max(c.st.acked, own.data.Fence) // written for our token: acknowledged
	}
	c.mu.Unlock()
	if mine {
		c.log.Info().Int64("worker_id", want).Str("forever", own.path).Msg("ZooKeeper confirms the cached worker ID and token")
	} else {
		c.log.Warn().Int64("worker_id", want).Str("forever", own.path).Str("token_there", own.data.Token).Int64("fence_there", int64(own.data.Fence)).
			Msg("another process claimed this worker ID since the cache file was written: claiming it afresh, after its fence")
	}
	return nil
}

// recheckOwn re-reads our forever znode after a version conflict. Our own
// write whose answer was lost (same worker ID, our token) is adopted, with
// its fence acknowledged; anything else is a take-over: the lease is
// blocked, renewals stop and the node issues nothing past the last
// acknowledged fence. Connection trouble is returned.
func (c *Coordinator) recheckOwn(ctx context.Context, z zkclient.Client) error {
	c.mu.Lock()
	path, want, token := c.st.path, c.st.workerID, c.st.token
	c.mu.Unlock()
	name := path[len(c.p.forever)+1:]
	key, seq, err := parseForeverName(name)
	if err != nil {
		c.block(fmt.Sprintf("own forever znode %s: %v", path, err))
		return nil
	}
	node, err := c.readForever(ctx, z, name, key, seq)
	if err == nil && mutation.Broken(mutation.S1AdoptAnyWrite) {
		node.workerID, node.data.Token = want, token
	}
	var me *malformedError
	switch {
	case errors.Is(err, zk.ErrNoNode):
		c.block(fmt.Sprintf("forever znode %s of worker ID %d is gone: the worker ID was recycled to another node key and the znode reaped, or it was deleted by hand", path, want))
	case errors.As(err, &me):
		c.block(fmt.Sprintf("worker ID %d: %v", want, err))
	case err != nil:
		return err
	case node.workerID != want:
		c.block(fmt.Sprintf("forever znode %s now maps to worker ID %d instead of %d (taken over by %s)", path, node.workerID, want, node.data.RecycledTo))
	case !fencing.Adopt(node.workerID, want, node.data.Token, token):
		c.block(fmt.Sprintf("worker ID %d was claimed by another process (token %s, at %s): this one stops at its last acknowledged ZooKeeper fence", want, node.data.Token, node.data.Addr))
	default:
		c.mu.Lock()
		c.st.version, c.st.data = node.version, node.data
		c.st.acked = max(c.st.acked, node.data.Fence)
		c.mu.Unlock()
	}
	return nil
}

// recordRenewFailure counts a failed (or, without a session, impossible)
// renewal by cause and keeps its description for zk_fence and Status; it
// returns the failures so far.
func (c *Coordinator) recordRenewFailure(cause, detail string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.failures++
	c.st.failedBy[cause]++
	c.st.renewErr = cause + ": " + detail
	return c.st.failures
}

// renew writes a new ZooKeeper fence and last_ts to our forever znode,
// version-checked (the version we last wrote is the fencing token: it
// fails once anyone else claimed the worker ID). The fence is now + G, or
// exactly final when final > 0 (Close's last write, with nothing issued
// after it). On success the fence is acknowledged and handed to fencer.
func (c *Coordinator) renew(ctx context.Context, z zkclient.Client, fencer Fencer, final snowflake.UnixMilli) error {
	for attempt := 1; attempt <= 2; attempt++ {
		c.mu.Lock()
		path, version, d, id, acked, reason := c.st.path, c.st.version, c.st.data, c.st.workerID, c.st.acked, c.st.reason
		c.mu.Unlock()
		now := snowflake.UnixMilliNow(c.clk)
		fence := fencing.Renew(acked, now, c.cfg.ZKFenceAhead)
		if final > 0 {
			fence = final
		}
		wid := id
		d.WorkerID, d.NodeKey, d.Addr, d.LastTS, d.Fence, d.Updated = &wid, c.cfg.NodeKey, c.cfg.Advertise, now, fence, now
		if d.Retired != 0 {
			// A retire that found this node's lease gone (its session
			// expired while the process lived): a renewal proves the
			// holder alive, so the mark goes, or the worker ID would be
			// recycled at the next lease gap instead of after recycle-after.
			c.log.Warn().Int64("worker_id", id).Time("retired", d.Retired.Time()).Msg("this node key was retired while it was alive; its renewal clears the mark")
		}
		d.Stopped, d.Retired, d.Version, d.Reason = final > 0, 0, c.cfg.Version, reason
		if final > 0 {
			d.Reason = ""
		}
		b, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("encode renewal: %w", err)
		}
		if mutation.Broken(mutation.S1RenewalUnversioned) && final == 0 {
			version = -1
		}
		st, err := z.Set(ctx, path, b, version)
		if err == nil {
			c.mu.Lock()
			c.st.version, c.st.data = st.Version, d
			if final == 0 {
				c.st.acked = fence
			}
			c.st.lastReport, c.st.renewErr = now, ""
			c.st.reports++
			c.mu.Unlock()
			if final == 0 {
				fencer.SetZKFence(fence)
			}
			return nil
		}
		cause := "other"
		switch {
		case zkclient.Transient(err):
			cause = "connection"
		case errors.Is(err, zk.ErrBadVersion):
			cause = "taken_over"
		case errors.Is(err, zk.ErrNoNode):
			cause = "deleted"
		}
		n := c.recordRenewFailure(cause, err.Error())
		if errors.Is(err, zk.ErrBadVersion) && attempt == 1 {
			if rerr := c.recheckOwn(ctx, z); rerr != nil {
				return fmt.Errorf("renew %s: re-read after a version conflict: %w", path, rerr)
			}
			c.mu.Lock()
			blocked := c.st.blocked
			c.mu.Unlock()
			if blocked == "" {
				continue // it was our own write: retry on the version read
			}
			return fmt.Errorf("renew %s: %s", path, blocked)
		}
		if errors.Is(err, zk.ErrNoNode) {
			c.block(fmt.Sprintf("forever znode %s of worker ID %d was deleted", path, id))
		}
		msg := "ZooKeeper fence renewal failed; retrying next round"
		if final > 0 {
			msg = "final fence write to ZooKeeper failed"
		}
		c.log.Warn().Err(err).Str("forever", path).Str("cause", cause).Int64("failures", n).Msg(msg)
		return fmt.Errorf("renew %s: %w", path, err)
	}
	return nil
}

// aliveResyncRounds is how many of Run's rounds pass between reads of the
// alive znode when nothing says it changed (10 s at the default report
// interval): the read catches an alive znode deleted by hand, at a tenth
// of a request per second per node.
const aliveResyncRounds = 10

// reconcileAlive makes alive/<id> exist exactly while the guard is in
// service (and the lease is held). resync re-reads ZooKeeper even when the
// local view says nothing changed.
func (r *runner) reconcileAlive(ctx context.Context, z zkclient.Client, sid int64, resync bool) {
	c := r.c
	inService := r.guard.Status().State == health.InService // not under c.mu: see updateChecks
	c.mu.Lock()
	want := c.st.leaseHeld && c.st.blocked == "" && inService
	owned, id := c.st.aliveOwned, c.st.workerID
	c.mu.Unlock()
	if want == owned && !resync {
		return
	}
	path := c.p.aliveNode(id)
	ok, st, err := z.Exists(ctx, path)
	if err != nil {
		c.log.Debug().Err(err).Str("alive", path).Msg("alive znode check failed; retrying later")
		return
	}
	mine := ok && st.EphemeralOwner == sid && sid != 0
	switch {
	case want && mine:
		c.setAlive(true)
	case want && ok:
		c.setAlive(false)
		if time.Since(r.warnedAt) > 10*time.Second {
			r.warnedAt = time.Now()
			c.log.Warn().Str("alive", path).Str("owner", sessionHex(st.EphemeralOwner)).
				Msg("alive znode held by another session (a dead predecessor's, until it expires); retrying")
		}
	case want:
		_, err := z.Create(ctx, path, []byte(c.cfg.Advertise), zk.FlagEphemeral, c.acl)
		if err != nil {
			c.log.Warn().Err(zkclient.AuthHint(err)).Str("alive", path).Msg("creating the alive znode failed; retrying")
			return
		}
		c.setAlive(true)
		c.log.Info().Str("alive", path).Msg("in service: alive znode created")
	case mine:
		if err := z.Delete(ctx, path, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
			c.log.Warn().Err(err).Str("alive", path).Msg("deleting the alive znode failed; retrying")
			return
		}
		c.setAlive(false)
		c.log.Info().Str("alive", path).Msg("out of service: alive znode deleted")
	default:
		c.setAlive(false)
	}
}

func (c *Coordinator) setAlive(v bool) {
	c.mu.Lock()
	c.st.aliveOwned = v
	c.mu.Unlock()
}

// noSessionDetail says that there is no ZooKeeper session in a connection
// state: StateConnected is a connection to a server on which no session is
// established yet (what /clock shows as connected false beside it).
func noSessionDetail(state zk.State) string {
	what := "not connected to a server"
	switch state {
	case zk.StateConnected:
		what = "connected to a server, no session established on it yet"
	case zk.StateExpired:
		what = "the session expired"
	case zk.StateAuthFailed:
		what = "authentication failed"
	case zk.StateConnecting:
		what = "connecting to a server"
	}
	return fmt.Sprintf("no ZooKeeper session (connection state %v: %s)", state, what)
}
