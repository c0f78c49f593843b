package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// errRestart: what Claim read changed under it; start over from the listing.
var errRestart = errors.New("forever znode changed while claiming")

// errRetryStep: a claim step read something that vanished in a way that a
// second attempt of the same step resolves (a znode deleted between a
// listing and its read). retry treats it like a transient ZooKeeper error:
// it tries the step again, and reports ErrZKUnavailable once ConnectTimeout
// has passed.
var errRetryStep = errors.New("retry this claim step")

// retryable: err is worth another attempt of the same step (a transient
// ZooKeeper failure or errRetryStep).
func retryable(err error) bool {
	return zkclient.Transient(err) || errors.Is(err, errRetryStep)
}

// maxClaimRounds bounds Claim's start-overs.
const maxClaimRounds = 10

// Claim connects to ZooKeeper and establishes this node's worker ID: it
// makes sure the cluster znodes exist with this layout and settings, checks
// the cluster's incarnation against prior's, finds or creates this node
// key's forever znode, and takes the worker ID (recycling one when the
// sequence is past the worker bits) in ONE multi that writes a new instance
// token and fence into the forever znode (version-checked) and creates the
// ephemeral lease. The previous holder's fence read there comes back as
// Identity.Fence: issue only after it. Errors wrap ErrZKUnavailable,
// ErrLayoutMismatch, ErrClusterMismatch, ErrIncarnationMismatch,
// ErrLeaseHeld or errNoFreeWorkerID when they are about those; after
// ErrZKUnavailable the node may serve from its cache (ResumeFromCache),
// after any error it must Close.
func (c *Coordinator) Claim(ctx context.Context, prior Prior) (Identity, error) {
	c.mu.Lock()
	if c.st.closed || c.st.mode != modeNone {
		c.mu.Unlock()
		return Identity{}, errors.New("claim worker id: coordinator already claimed, resumed or closed")
	}
	c.mu.Unlock()
	defer c.setProgress("")
	id, err := c.claim(ctx, prior)
	if err != nil {
		return Identity{}, fmt.Errorf("claim worker id: %w", err)
	}
	return id, nil
}

// claimed is the outcome of one successful claim of a worker ID.
type claimed struct {
	node     *foreverNode // as written by the claim (version and data)
	session  int64
	recycled bool
	// prevKey and prevAddr name the holder whose fence node.data.PrevFence
	// is; prevStopped: it stopped cleanly (its fence is its last ID's time).
	prevKey, prevAddr string
	prevStopped       bool
}

func (c *Coordinator) claim(ctx context.Context, prior Prior) (Identity, error) {
	c.setProgress(fmt.Sprintf("connecting to ZooKeeper %s", strings.Join(c.cfg.Servers, ",")))
	conn, err := c.connect(ctx)
	if err != nil {
		return Identity{}, err
	}
	z := zkclient.Client{Conn: conn, Timeout: c.opTimeout}
	c.setProgress(fmt.Sprintf("reading the znodes of cluster %q", c.cfg.Cluster))
	var cd clusterData
	if err := c.retry(ctx, "ensure cluster znodes", func(ctx context.Context) error {
		var err error
		cd, err = c.ensureCluster(ctx, z)
		return err
	}); err != nil {
		return Identity{}, err
	}
	if mutation.Broken(mutation.TombstoneFloorSkipped) {
		cd.FenceFloor = 0
	}
	// The cluster's recycle-after as read now: the scan of a recycle uses
	// it (the node's own, when set, is the same: checkShared).
	inc, recycleAfter := cd.Incarnation, msDuration(cd.RecycleAfterMs)
	if err := checkIncarnation(c.cfg.Cluster, inc, prior); err != nil {
		return Identity{}, err
	}
	priorSession := parseSession(prior.Session)
	token := zkclient.NewToken() // one per Claim: a claim whose answer was lost is recognised by it
	for round := 1; round <= maxClaimRounds; round++ {
		c.setProgress(fmt.Sprintf("claiming a worker ID for node key %q", c.cfg.NodeKey))
		node, err := c.findOrCreateForever(ctx, z, cd.FenceFloor)
		if err != nil {
			return Identity{}, err
		}
		var cl claimed
		if node.workerID == noWorker {
			cl, err = c.recycle(ctx, z, node, token, recycleAfter)
		} else if err = c.checkSeqTwins(ctx, z, node); err == nil {
			cl, err = c.claimOwn(ctx, z, node, token, priorSession)
		}
		if errors.Is(err, errRestart) {
			c.log.Debug().Int("round", round).Msg("forever znode changed while claiming; starting over")
			continue
		}
		if err != nil {
			return Identity{}, err
		}
		n := cl.node
		c.mu.Lock()
		c.st.mode, c.st.workerID, c.st.path, c.st.version, c.st.data = modeClaimed, n.workerID, n.path, n.version, n.data
		c.st.verified, c.st.leaseHeld, c.st.leaseSession = true, cl.session != 0, cl.session
		if cl.session != 0 {
			c.st.leaseDetail = ""
		}
		c.st.token, c.st.acked, c.st.incarnation = token, n.data.Fence, inc
		c.st.lastReport, c.st.renewErr = n.data.Updated, ""
		c.mu.Unlock()
		id := Identity{
			// A forever znode created by hand, or by a release before the
			// floor, may lack it: the claim starts after it all the same.
			WorkerID: n.workerID, PrevFence: max(n.data.PrevFence, cd.FenceFloor), ZKFence: n.data.Fence, Token: token, PrevToken: n.data.PrevToken,
			Incarnation: inc, Path: n.path, Recycled: cl.recycled, PrevNodeKey: cl.prevKey, PrevAddr: cl.prevAddr, PrevStopped: cl.prevStopped,
			RecycleAfter: recycleAfter,
		}
		if cl.session != 0 {
			id.Session = sessionHex(cl.session)
		}
		c.log.Info().Int64("worker_id", id.WorkerID).Str("forever", id.Path).Int64("prev_fence", int64(id.PrevFence)).
			Int64("zk_fence", int64(id.ZKFence)).Bool("recycled", id.Recycled).Str("session", id.Session).Msg("claimed worker ID")
		c.updateChecks(true)
		c.poke()
		return id, nil
	}
	return Identity{}, fmt.Errorf("this node key's forever znode kept changing: gave up after %d rounds", maxClaimRounds)
}

// parseSession reads a "0x…" session ID; 0 for "" or anything else.
func parseSession(s string) int64 {
	h, ok := strings.CutPrefix(s, "0x")
	if !ok {
		return 0
	}
	v, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return 0
	}
	return int64(v)
}

// claimData is what a claim by token writes over prev: a new token, the
// previous holder's token and fence, and a fence G ahead of now (never
// below the previous one).
func (c *Coordinator) claimData(prev foreverData, workerID int64, token string, now snowflake.UnixMilli) foreverData {
	d := prev
	wid := workerID
	d.WorkerID, d.NodeKey, d.Addr, d.Updated, d.Stopped, d.Retired = &wid, c.cfg.NodeKey, c.cfg.Advertise, now, false, 0
	d.Version = c.cfg.Version
	r := fencing.Claim(fencing.Record{Token: prev.Token, Fence: prev.Fence}, token, now, c.cfg.ZKFenceAhead)
	d.Token, d.Fence, d.PrevToken, d.PrevFence = r.Token, r.Fence, r.PrevToken, r.PrevFence
	return d
}

// claimOwn takes node's worker ID (this node key's own) with token: one
// multi sets the forever znode's data (new token and fence, version-checked)
// and creates the lease. When the znode already carries token, an earlier
// attempt of this Claim committed and only its answer was lost: the lease is
// then taken with a version check alone.
func (c *Coordinator) claimOwn(ctx context.Context, z zkclient.Client, node *foreverNode, token string, priorSession int64) (claimed, error) {
	written, first, err := c.claimOp(node, token)
	if err != nil {
		return claimed{}, err
	}
	sess, err := c.takeLease(ctx, z, node, first, priorSession)
	if err != nil {
		return claimed{}, err
	}
	// The holder that wrote the fence claimData carried over: an earlier
	// process of this node key (unknown when an earlier attempt of this
	// claim wrote the znode, whose data are then ours).
	c.setProgress(fmt.Sprintf("claiming worker ID %d for node key %q", node.workerID, c.cfg.NodeKey))
	cl := claimed{node: &written, session: sess}
	if node.data.Token != token {
		cl.prevKey, cl.prevAddr, cl.prevStopped = node.data.NodeKey, node.data.Addr, node.data.Stopped
	}
	return cl, nil
}

// claimOp is the op on node's forever znode that goes with the lease create
// for token: when the znode already carries token (our own earlier write),
// a version check alone; else a version-checked SetData of claimData. It
// returns the znode as it will be once the op commits.
func (c *Coordinator) claimOp(node *foreverNode, token string) (foreverNode, any, error) {
	written := *node
	if node.data.Token == token {
		return written, &zk.CheckVersionRequest{Path: node.path, Version: node.version}, nil
	}
	written.data = c.claimData(node.data, node.workerID, token, snowflake.UnixMilliNow(c.clk))
	b, err := json.Marshal(written.data)
	if err != nil {
		return foreverNode{}, nil, fmt.Errorf("encode forever data: %w", err)
	}
	written.version++
	return written, &zk.SetDataRequest{Path: node.path, Data: b, Version: node.version}, nil
}

// poke wakes Run.
func (c *Coordinator) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// malformedError is a forever znode whose data cannot be trusted.
type malformedError struct {
	path string
	err  error
}

func (e *malformedError) Error() string {
	return fmt.Sprintf("forever znode %s is malformed: %v", e.path, e.err)
}

// readForever reads and decodes one forever znode. A malformed one is
// returned along with a *malformedError.
func (c *Coordinator) readForever(ctx context.Context, z zkclient.Client, name, key string, seq int64) (*foreverNode, error) {
	path := c.p.forever + "/" + name
	b, st, err := z.Get(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return decodeForeverNode(c.p, name, key, seq, b, st, c.cfg.WorkerIDs)
}

func decodeForeverNode(p paths, name, key string, seq int64, b []byte, st *zk.Stat, ids WorkerRange) (*foreverNode, error) {
	n := &foreverNode{name: name, path: p.forever + "/" + name, key: key, seq: seq, version: st.Version}
	d, id, err := decodeForever(b, key, seq, ids)
	n.data, n.workerID = d, id
	if err != nil {
		n.workerID = noWorker
		return n, &malformedError{n.path, err}
	}
	return n, nil
}

// findOwn finds this node key's forever znode (the lowest if several), or
// returns nil. It never creates one.
func (c *Coordinator) findOwn(ctx context.Context, z zkclient.Client) (*foreverNode, error) {
	names, err := z.Children(ctx, c.p.forever)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.p.forever, err)
	}
	type cand struct {
		name string
		seq  int64
	}
	var mine, others []cand
	for _, n := range names {
		key, seq, err := parseForeverName(n)
		if err != nil {
			c.log.Warn().Err(err).Str("dir", c.p.forever).Msg("skipping a znode that is not a forever znode")
			continue
		}
		if key == c.cfg.NodeKey {
			mine = append(mine, cand{n, seq})
		} else {
			others = append(others, cand{n, seq})
		}
	}
	if len(mine) == 0 {
		return nil, nil
	}
	slices.SortFunc(mine, func(a, b cand) int { return int(a.seq - b.seq) })
	if len(mine) > 1 {
		all := make([]string, len(mine))
		for i, m := range mine {
			all[i] = m.name
		}
		c.log.Warn().Strs("forever", all).Str("using", mine[0].name).
			Msg("several forever znodes for this node key (a create was retried, or two processes started at once); using the lowest")
	}
	node, err := c.readForever(ctx, z, mine[0].name, c.cfg.NodeKey, mine[0].seq)
	var me *malformedError
	if errors.As(err, &me) {
		return nil, fmt.Errorf("%w; its worker ID cannot be known, so this node will not guess: fix its data or delete it (this node key then gets a new worker ID)", err)
	}
	if errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("%w: %v", errRetryStep, err) // vanished between list and read: list again
	}
	if err != nil {
		return nil, err
	}
	for _, o := range others {
		if o.seq == node.seq {
			node.seqTwins = append(node.seqTwins, o.name)
		}
	}
	return node, nil
}

// checkSeqTwins refuses node's worker ID when another forever znode carries
// node's sequence number in its name: ZooKeeper never hands one out twice,
// so that znode was made by hand or by something else, and if its data
// cannot be decoded, or names node's worker ID, the ID may be used by it.
// It reads only such twins (found by findOwn's listing): a claim costs no
// read of the other forever znodes, whose worker IDs the claim protocol
// itself keeps unique.
func (c *Coordinator) checkSeqTwins(ctx context.Context, z zkclient.Client, node *foreverNode) error {
	for _, name := range node.seqTwins {
		key, seq, err := parseForeverName(name)
		if err != nil {
			continue
		}
		var o *foreverNode
		malformed := false
		if err := c.retry(ctx, "read a forever znode with this znode's sequence", func(ctx context.Context) error {
			var err error
			o, err = c.readForever(ctx, z, name, key, seq)
			var me *malformedError
			malformed = errors.As(err, &me)
			if malformed || errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			return err
		}); err != nil {
			return err
		}
		switch {
		case o == nil:
		case malformed && c.cfg.WorkerIDs.implicit(o.seq) == node.workerID:
			return fmt.Errorf("worker ID %d may be held by %s, whose data is malformed: refusing to use it; fix or delete that znode",
				node.workerID, o.path)
		case o.workerID == node.workerID:
			return fmt.Errorf("worker ID %d is named by both %s and %s (edited by hand?): refusing to use it; fix the data of one of them",
				node.workerID, node.path, o.path)
		}
	}
	return nil
}

// findOrCreateForever returns this node key's forever znode, creating it if
// there is none. A create that failed for connection reasons may have
// succeeded, so it lists again before creating again: a retry never leaves a
// second znode for the key.
func (c *Coordinator) findOrCreateForever(ctx context.Context, z zkclient.Client, floor snowflake.UnixMilli) (*foreverNode, error) {
	start := time.Now()
	for attempt := 1; attempt <= 20; attempt++ {
		var own *foreverNode
		if err := c.retry(ctx, "find this node key's forever znode", func(ctx context.Context) error {
			var err error
			own, err = c.findOwn(ctx, z)
			return err
		}); err != nil {
			return nil, err
		}
		if own != nil {
			return own, nil
		}
		now := snowflake.UnixMilliNow(c.clk)
		// The cluster's fence floor (a deleted predecessor's fence) is the
		// new znode's fence: its first claim takes it as the previous
		// holder's, and so does every recycler of its worker ID.
		data, err := json.Marshal(foreverData{NodeKey: c.cfg.NodeKey, Addr: c.cfg.Advertise, Version: c.cfg.Version, LastTS: now, Updated: now, Fence: floor})
		if err != nil {
			return nil, fmt.Errorf("encode forever data: %w", err)
		}
		path, err := z.Create(ctx, c.p.foreverPrefix(c.cfg.NodeKey), data, zk.FlagSequence, c.acl)
		if err == nil {
			c.log.Info().Str("forever", path).Msg("created this node key's forever znode")
			continue // read it back through the listing: one code path decides
		}
		if !zkclient.Transient(err) {
			return nil, fmt.Errorf("create forever znode for node key %q: %w", c.cfg.NodeKey, zkclient.AuthHint(err))
		}
		if ctx.Err() != nil || time.Since(start) >= c.cfg.ConnectTimeout {
			return nil, fmt.Errorf("create forever znode: %w: %v", ErrZKUnavailable, err)
		}
		c.log.Warn().Err(err).Msg("creating the forever znode failed with its outcome unknown; listing before trying again")
	}
	return nil, fmt.Errorf("create forever znode for node key %q: no znode after 20 attempts", c.cfg.NodeKey)
}

// leaseResult is the outcome of one attempt to take a lease.
type leaseResult int8

const (
	leaseTaken        leaseResult = iota // we hold it
	leaseNodeChanged                     // our forever znode changed: re-read it
	leaseHeldByOurKey                    // another session of this node key holds it
	leaseHeldByOther                     // another node key holds it
	leaseRetry                           // a lease we may remove was removed: try again at once
)

// tryLease makes one attempt to create leases/<id> atomically with first,
// an op on node's forever znode at the version we read: a SetData that
// writes our claim (new token and fence), or a CheckVersion when the znode
// already carries our token (a re-lease after a session expiry). When the
// version check fails while the lease is held by another session (a live
// process of this node key keeps renewing), the holder is reported, not a
// changed node: re-reading would only lose the race again at its next
// renewal. A lease of priorSession (the previous process on this disk,
// provably gone: the caller holds the cache file's lock) is deleted, and so
// is one of our own session left by an attempt whose SetData did not
// commit; both give leaseRetry.
func (c *Coordinator) tryLease(ctx context.Context, z zkclient.Client, node *foreverNode, first any, priorSession int64) (leaseAttempt, error) {
	lp := c.p.lease(node.workerID)
	sid := z.Conn.SessionID()
	ld, err := json.Marshal(leaseData{NodeKey: c.cfg.NodeKey, Addr: c.cfg.Advertise, SessionID: sessionHex(sid)})
	if err != nil {
		return leaseAttempt{}, fmt.Errorf("encode lease data: %w", err)
	}
	failed, mErr := z.Multi(ctx, first, &zk.CreateRequest{Path: lp, Data: ld, Acl: c.acl, Flags: zk.FlagEphemeral})
	changed, err := leaseMultiOutcome(lp, failed, mErr)
	if err != nil {
		return leaseAttempt{}, err
	}
	b, st, err := z.Get(ctx, lp)
	if errors.Is(err, zk.ErrNoNode) && changed {
		return leaseAttempt{res: leaseNodeChanged}, nil
	}
	if errors.Is(err, zk.ErrNoNode) {
		return leaseAttempt{}, fmt.Errorf("lease %s vanished right after the attempt: %w", lp, errRetryStep)
	}
	if err != nil {
		return leaseAttempt{}, fmt.Errorf("read lease %s: %w", lp, err)
	}
	owner := st.EphemeralOwner
	_, checkOnly := first.(*zk.CheckVersionRequest)
	mine := owner == sid && sid != 0
	switch {
	case mine && mErr == nil:
		return leaseAttempt{res: leaseTaken, session: sid}, nil
	case mine && changed:
		return leaseAttempt{res: leaseNodeChanged}, nil // e.g. our own claim committed with its answer lost: re-read
	case mine && checkOnly:
		return leaseAttempt{res: leaseTaken, session: sid}, nil // an earlier attempt of this re-lease committed
	case mine, owner == priorSession && priorSession != 0:
		return c.removeStaleLease(ctx, z, lp, st, sid)
	}
	a := leaseAttempt{res: leaseHeldByOther, holder: describeHolder(b, st)}
	if d, err := decodeLease(b); err == nil && d.NodeKey == c.cfg.NodeKey {
		a.res = leaseHeldByOurKey
	}
	return a, nil
}

// leaseAttempt is what one tryLease found: its result, the session that
// holds the lease when taken, and the holder (described for logs and
// errors) when another session holds it.
type leaseAttempt struct {
	res     leaseResult
	session int64
	holder  string
}

// leaseMultiOutcome sorts the answer of tryLease's multi: changed when the
// op on the forever znode failed (the lease create was not attempted), an
// error when the failure is neither that nor an existing lease.
func leaseMultiOutcome(lp string, failed int, mErr error) (changed bool, err error) {
	switch {
	case mErr == nil:
	case failed == 0 && (errors.Is(mErr, zk.ErrBadVersion) || errors.Is(mErr, zk.ErrNoNode)):
		return true, nil
	case failed == 1 && errors.Is(mErr, zk.ErrNodeExists):
	case failed == 1 && errors.Is(mErr, zk.ErrNoNode):
		return false, fmt.Errorf("take lease %s: %w: the leases znode is missing", lp, mErr)
	default:
		return false, fmt.Errorf("take lease %s: %w", lp, zkclient.AuthHint(mErr))
	}
	return false, nil
}

// removeStaleLease deletes the lease lp (read at st) of a session that is
// provably gone (the prior process on this disk, or our own leftover); the
// attempt is then made again (leaseRetry).
func (c *Coordinator) removeStaleLease(ctx context.Context, z zkclient.Client, lp string, st *zk.Stat, sid int64) (leaseAttempt, error) {
	owner := st.EphemeralOwner
	if derr := z.Delete(ctx, lp, st.Version); derr != nil && !errors.Is(derr, zk.ErrNoNode) && !errors.Is(derr, zk.ErrBadVersion) {
		return leaseAttempt{}, fmt.Errorf("remove the stale lease %s of session %s: %w", lp, sessionHex(owner), derr)
	}
	c.log.Info().Str("lease", lp).Str("session", sessionHex(owner)).Bool("own_session", owner == sid).
		Msg("removed a stale lease: its process is gone (this process holds the cache file's lock, or it is our own leftover)")
	return leaseAttempt{res: leaseRetry}, nil
}

// takeLease takes node's lease for Claim together with first (see
// tryLease). A lease held by another session of this node key is most
// likely a crashed predecessor's, which lingers until its session times out
// (longer if ZooKeeper elects a leader meanwhile: every session's timeout
// starts again). So it watches the holder for the stale-lease wait (session
// timeout + margin, at least two report intervals): if the holder's forever
// znode changes meanwhile (it renews), the holder is evidently alive and
// the claim fails with ErrLeaseHeld. Otherwise the claim commits first
// without the lease, safe because a claim's token and fence fence out
// whatever the lease holder could still issue, and takeLease returns
// session 0: the node stays out of service (lease_lost) until Run takes the
// lease once the stale one is gone. A live holder is never displaced.
func (c *Coordinator) takeLease(ctx context.Context, z zkclient.Client, node *foreverNode, first any, priorSession int64) (int64, error) {
	var waitUntil time.Time
	wait := max(c.staleLeaseWait(), 2*c.cfg.ReportInterval)
	for attempt := 1; attempt <= 1000; attempt++ {
		var a leaseAttempt
		if err := c.retry(ctx, "take lease", func(ctx context.Context) error {
			var err error
			a, err = c.tryLease(ctx, z, node, first, priorSession)
			return err
		}); err != nil {
			return 0, err
		}
		holder := a.holder
		switch a.res {
		case leaseTaken:
			return a.session, nil
		case leaseNodeChanged:
			return 0, errRestart
		case leaseRetry:
			continue
		case leaseHeldByOther:
			return 0, fmt.Errorf("%w: worker ID %d (forever znode %s) is leased by %s", ErrLeaseHeld, node.workerID, node.path, holder)
		}
		if waitUntil.IsZero() {
			waitUntil = time.Now().Add(wait)
			c.log.Warn().Int64("worker_id", node.workerID).Str("holder", holder).Dur("watch_ms", wait).
				Msg("lease held by another session of this node key (a crashed predecessor?): watching whether it renews")
			c.mu.Lock()
			c.progress = claimProgress{until: waitUntil, leaseWait: fmt.Sprintf(
				"waiting for the lease on worker ID %d, held by %s, to go: an earlier session of this node key (a crashed predecessor's lingers until ZooKeeper ends its session, after the session timeout %v); watching whether it renews",
				node.workerID, holder, c.sessionTimeout().Round(time.Millisecond))}
			c.mu.Unlock()
		}
		var version int32
		if err := c.retry(ctx, "watch the lease holder", func(ctx context.Context) error {
			_, st, err := z.Get(ctx, node.path)
			if err == nil {
				version = st.Version
			}
			return err
		}); err != nil {
			return 0, err
		}
		if version != node.version {
			return 0, fmt.Errorf("%w: worker ID %d is leased by %s, another session of this node key, whose forever znode %s was renewed while we waited: is another process running with node key %q?",
				ErrLeaseHeld, node.workerID, holder, node.path, c.cfg.NodeKey)
		}
		if !time.Now().Before(waitUntil) {
			return 0, c.claimWithoutLease(ctx, z, node, first, holder, wait)
		}
		c.waitGone(ctx, z, c.p.lease(node.workerID), waitUntil)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("waiting for the lease of worker ID %d held by %s: %w", node.workerID, holder, ctx.Err())
		}
	}
	return 0, fmt.Errorf("take lease on worker ID %d: too many attempts", node.workerID)
}

// claimWithoutLease commits a claim's write to the forever znode alone
// (version-checked), for a lease holder that showed no sign of life: the
// new token fences it out; the lease follows in Run.
func (c *Coordinator) claimWithoutLease(ctx context.Context, z zkclient.Client, node *foreverNode, first any, holder string, watched time.Duration) error {
	if set, ok := first.(*zk.SetDataRequest); ok {
		if _, err := z.Set(ctx, set.Path, set.Data, set.Version); err != nil {
			if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) || zkclient.Transient(err) {
				return errRestart // re-read: our token is recognised if the write landed
			}
			return fmt.Errorf("claim worker ID %d: %w", node.workerID, zkclient.AuthHint(err))
		}
	}
	c.log.Warn().Int64("worker_id", node.workerID).Str("holder", holder).Dur("watched_ms", watched).
		Msg("the lease holder showed no sign of life (its forever znode was not renewed): claimed the worker ID; out of service until its stale lease expires")
	c.setLeaseDetail(fmt.Sprintf("waiting for the stale lease on worker ID %d, held by %s, to expire (its holder showed no sign of life for %v)",
		node.workerID, holder, watched.Round(time.Millisecond)))
	return nil
}

// waitGone waits until path is deleted, until, ctx ends, or 500ms pass.
func (c *Coordinator) waitGone(ctx context.Context, z zkclient.Client, path string, until time.Time) {
	ok, ch, err := z.ExistsW(ctx, path)
	if err != nil || !ok {
		return
	}
	t := clock.NewTimer(ctx, max(min(time.Until(until), 500*time.Millisecond), time.Millisecond))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

// scan is a consistent-enough picture of the worker-ID space for recycling.
// Its parentVersion is read first: every take-over sets the forever
// parent's data, and a take-over of a worker ID no forever znode names does
// so at that version, so any take-over committed after the scan began
// (even inside it, tearing it) makes that one fail (recycleOps).
type scan struct {
	parentVersion int32
	byPath        map[string]*foreverNode
	malformed     []string // forever znodes whose data cannot be decoded
	claimers      map[int64][]*foreverNode
	leased        map[int64]bool
}

func (c *Coordinator) scanCluster(ctx context.Context, z zkclient.Client) (*scan, error) {
	_, pst, err := z.Get(ctx, c.p.forever)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.p.forever, err)
	}
	s := &scan{parentVersion: pst.Version, byPath: map[string]*foreverNode{}, claimers: map[int64][]*foreverNode{}, leased: map[int64]bool{}}
	names, err := z.Children(ctx, c.p.forever)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.p.forever, err)
	}
	type named struct {
		name, key string
		seq       int64
	}
	var ok []named
	var paths []string
	for _, n := range names {
		key, seq, err := parseForeverName(n)
		if err != nil {
			c.log.Warn().Err(err).Str("dir", c.p.forever).Msg("skipping a znode that is not a forever znode")
			continue
		}
		ok = append(ok, named{n, key, seq})
		paths = append(paths, c.p.forever+"/"+n)
	}
	got, err := z.GetMany(ctx, paths)
	if err != nil {
		return nil, err
	}
	maxID := c.cfg.Layout.MaxWorkerID()
	for i, n := range ok {
		if got[i] == nil {
			continue // deleted meanwhile
		}
		node, err := decodeForeverNode(c.p, n.name, n.key, n.seq, got[i].Data, got[i].Stat, c.cfg.WorkerIDs)
		s.byPath[node.path] = node
		if err != nil {
			c.log.Warn().Err(err).Msg("malformed forever znode: the worker ID it holds is unknown")
			s.malformed = append(s.malformed, node.path)
			continue
		}
		if node.workerID != noWorker {
			s.claimers[node.workerID] = append(s.claimers[node.workerID], node)
		}
	}
	leases, err := z.Children(ctx, c.p.leases)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.p.leases, err)
	}
	for _, n := range leases {
		id, err := parseWorkerName(n, maxID)
		if err != nil {
			c.log.Warn().Err(err).Str("dir", c.p.leases).Msg("skipping a znode that is not a lease")
			continue
		}
		s.leased[id] = true
	}
	return s, nil
}

// free lists the worker IDs that may be taken over at now: no
// lease, and every forever znode claiming it (if any) last reported more
// than recycleAfter ago or was retired (snowflakectl node retire). summary
// describes the space for errNoFreeWorkerID.
func (s *scan) free(r WorkerRange, now snowflake.UnixMilli, recycleAfter time.Duration) (ids []int64, summary string) {
	var leased, fresh int
	cutoff := now.Add(-recycleAfter)
	lo := r.Lo
	if mutation.Broken(mutation.RangeIgnored) {
		lo = 0
	}
	for id := lo; id <= r.Hi; id++ {
		if s.leased[id] {
			leased++
			continue
		}
		recent := false
		for _, n := range s.claimers[id] {
			if n.lastSeen() >= cutoff && n.data.Retired == 0 {
				recent = true
			}
		}
		if recent {
			fresh++
			continue
		}
		ids = append(ids, id)
	}
	return ids, fmt.Sprintf("all %d worker IDs of the cluster's range %s are taken: %d hold a lease, %d more reported within the last %v (recycle-after)",
		r.Size(), r, leased, fresh, recycleAfter)
}

// recycleTries bounds the worker IDs one scan is tried with: a take-over
// that loses its ID to another recycler tries the next free ID the same
// scan found before scanning again.
const recycleTries = 8

// recycle takes over a free worker ID for own, whose sequence is past the
// worker bits (or whose ID was taken over), free after recycleAfter (the
// cluster's, read by this claim). One multi per try (recycleOps): evict
// every forever znode still naming the ID at its scanned version, set own's
// worker_id at its version, create the lease, and set the forever parent
// (at the scan's version only for an ID no forever znode names). Recyclers
// of different IDs do not contend: one scan serves up to recycleTries IDs,
// and only a lost own znode or an exhausted list scans again, after a
// jittered backoff.
func (c *Coordinator) recycle(ctx context.Context, z zkclient.Client, own *foreverNode, token string, recycleAfter time.Duration) (claimed, error) {
	ids := c.cfg.WorkerIDs
	scans := int(min(ids.Size(), 4096))/recycleTries + 10
	start := time.Now()
	attempt := 0
	for round := 1; round <= scans; round++ {
		if round > 1 && !c.recycleBackoff(ctx, round) {
			return claimed{}, fmt.Errorf("recycling: %w", ctx.Err())
		}
		var s *scan
		if err := c.retry(ctx, "scan worker IDs for recycling", func(ctx context.Context) error {
			var err error
			s, err = c.scanCluster(ctx, z)
			return err
		}); err != nil {
			return claimed{}, err
		}
		me := s.byPath[own.path]
		switch {
		case me == nil:
			return claimed{}, errRestart // our forever znode vanished
		case me.workerID != noWorker:
			return claimed{}, errRestart // it got an ID meanwhile (e.g. our last multi's answer was lost)
		}
		if len(s.malformed) > 0 {
			return claimed{}, fmt.Errorf("recycling refused: forever znode(s) %s have malformed data, so the worker IDs they hold are unknown; fix or delete them",
				strings.Join(s.malformed, ", "))
		}
		now := snowflake.UnixMilliNow(c.clk)
		free, summary := s.free(ids, now, recycleAfter)
		if len(free) == 0 {
			return claimed{}, fmt.Errorf("%w: sequence %d of %s is past the cluster's worker IDs %s (layout %s) and %s",
				errNoFreeWorkerID, own.seq, own.path, ids, c.cfg.Layout, summary)
		}
	tries:
		for try := 0; try < recycleTries && len(free) > 0; try++ {
			attempt++
			i := pickFree(c.cfg.NodeKey, attempt, len(free))
			w := free[i]
			free = slices.Delete(free, i, i+1)
			cl, outcome, err := c.tryRecycle(ctx, z, s, me, w, now, token)
			switch outcome {
			case recycleDone:
				c.reap(ctx, z, s, me.path, now, recycleAfter)
				return cl, nil
			case recycleFailed:
				return claimed{}, err
			case recycleRescan:
				if ctx.Err() != nil || time.Since(start) >= c.cfg.ConnectTimeout {
					return claimed{}, fmt.Errorf("recycle worker ID %d: %w: %v", w, ErrZKUnavailable, err)
				}
				break tries // the scan is stale: read again
			case recycleOwnChanged:
				return claimed{}, errRestart
			}
		}
	}
	return claimed{}, fmt.Errorf("recycling: gave up after %d scans and %d worker IDs contended by other nodes", scans, attempt)
}

// recycleBackoff waits before the round-th scan of a recycle: a random
// time up to 20ms·2^round (at most a second), drawn from the node key and
// the round (a simulation's seed replays it), so that recyclers that lost
// at once do not scan again at once. False when ctx ended.
func (c *Coordinator) recycleBackoff(ctx context.Context, round int) bool {
	ceil := min(20*time.Millisecond<<min(round, 6), time.Second)
	d := time.Duration(pickFree(c.cfg.NodeKey, -round, int(ceil/time.Millisecond)+1)) * time.Millisecond
	return clock.Sleep(ctx, max(d, time.Millisecond))
}

// recycleOutcome is what one take-over try did.
type recycleOutcome int8

const (
	recycleDone       recycleOutcome = iota // the worker ID is ours
	recycleLost                             // another node changed what this ID's try checked: try the next ID
	recycleRescan                           // outcome unknown or the session changed: scan again
	recycleOwnChanged                       // our own forever znode changed: the claim starts over
	recycleFailed                           // a permanent error
)

// tryRecycle makes one take-over multi for worker ID w from scan s.
func (c *Coordinator) tryRecycle(ctx context.Context, z zkclient.Client, s *scan, me *foreverNode, w int64, now snowflake.UnixMilli, token string) (claimed, recycleOutcome, error) {
	c.setProgress(fmt.Sprintf("taking over worker ID %d for node key %q (recycling)", w, c.cfg.NodeKey))
	ops, mine, from, prevHolder, err := c.recycleOps(s, me, w, now, token)
	if err != nil {
		return claimed{}, recycleFailed, err
	}
	failed, err := z.Multi(ctx, ops...)
	if err == nil {
		_, st, gerr := z.Get(ctx, c.p.lease(w))
		if gerr != nil || st.EphemeralOwner != z.Conn.SessionID() {
			return claimed{}, recycleRescan, fmt.Errorf("lease %d after the take-over: %v", w, gerr) // the session changed right after: the next scan shows what we own
		}
		node := *me
		node.version, node.data, node.workerID = me.version+1, mine, w
		c.log.Warn().Int64("worker_id", w).Strs("from", from).Int64("prev_fence", int64(mine.PrevFence)).Str("forever", me.path).
			Msg("took over a recycled worker ID (its previous owner held no lease and had not renewed for longer than recycle-after, or was retired); issuing only after its fence")
		return claimed{node: &node, session: st.EphemeralOwner, recycled: true, prevKey: prevHolder.NodeKey, prevAddr: prevHolder.Addr, prevStopped: prevHolder.Stopped}, recycleDone, nil
	}
	ownOp := len(ops) - 2 // recycleOps: forever/, the evicted owners, our forever znode, the lease
	switch {
	case zkclient.Transient(err):
		c.log.Warn().Err(err).Int64("worker_id", w).Msg("recycling multi failed with its outcome unknown; scanning again")
		return claimed{}, recycleRescan, err
	case failed == ownOp && (errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode)):
		return claimed{}, recycleOwnChanged, err
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
		c.log.Debug().Err(err).Int("op", failed).Int64("worker_id", w).Msg("lost a recycling race for this worker ID; trying the next free one")
		return claimed{}, recycleLost, err
	}
	return claimed{}, recycleFailed, fmt.Errorf("recycle worker ID %d: %w", w, zkclient.AuthHint(err))
}

// pickFree chooses one of n free worker IDs for a node key's attempt-th
// try at recycling: spread over the free IDs by node key and attempt, so
// that nodes recycling at once seldom race for one ID, and decided by them
// alone (no process-wide random source), so that a simulation's seed
// replays the same choice.
func pickFree(nodeKey string, attempt, n int) int {
	h := fnv.New64a()
	h.Write([]byte(nodeKey))
	return rand.New(rand.NewPCG(h.Sum64(), uint64(attempt))).IntN(n)
}

// recycleOps builds the take-over multi for worker ID w: our data carries
// token, the evicted owners' highest fence as PrevFence and a fence G ahead.
// holder is the evicted owner whose fence that is (its node key and address).
func (c *Coordinator) recycleOps(s *scan, me *foreverNode, w int64, now snowflake.UnixMilli, token string) (ops []any, mine foreverData, from []string, holder foreverData, err error) {
	none := int64(noWorker)
	var prev foreverData // the evicted owners folded into one: highest fence, its token
	for _, o := range s.claimers[w] {
		f := max(o.data.Fence, o.data.LastTS)
		if mutation.Broken(mutation.RetiredFenceDropped) && o.data.Retired != 0 {
			f = 0
		}
		if f >= prev.Fence {
			prev.Token, prev.Fence = o.data.Token, f
			holder.NodeKey, holder.Addr = o.data.NodeKey, o.data.Addr
		}
		from = append(from, o.path)
		d := o.data
		wid := w
		d.WorkerID, d.PrevWorkerID, d.RecycledTo, d.Updated = &none, &wid, me.path, now
		b, err := json.Marshal(d)
		if err != nil {
			return nil, mine, nil, holder, fmt.Errorf("encode evicted forever data: %w", err)
		}
		v := o.version
		if mutation.Broken(mutation.RecycleEvictUnversioned) {
			v = -1
		}
		ops = append(ops, &zk.SetDataRequest{Path: o.path, Data: b, Version: v})
	}
	if len(from) == 0 {
		c.log.Warn().Int64("worker_id", w).Msg("no forever znode names this worker ID (deleted by hand?): no fence to carry over")
	}
	claim := c.claimData(prev, w, token, now)
	mine = me.data
	mine.WorkerID, mine.PrevWorkerID, mine.RecycledTo = claim.WorkerID, nil, ""
	mine.NodeKey, mine.Addr, mine.LastTS, mine.Updated = c.cfg.NodeKey, c.cfg.Advertise, now, now
	mine.Version = c.cfg.Version
	mine.Token, mine.PrevToken, mine.PrevFence, mine.Fence = token, claim.PrevToken, claim.PrevFence, claim.Fence
	mine.RecycledFrom = strings.Join(from, ",")
	mine.Stopped, mine.Retired = false, 0
	b, err := json.Marshal(mine)
	if err != nil {
		return nil, mine, nil, holder, fmt.Errorf("encode forever data: %w", err)
	}
	ops = append(ops, &zk.SetDataRequest{Path: me.path, Data: b, Version: me.version})
	audit, err := json.Marshal(map[string]any{"last_recycle": map[string]any{"worker_id": w, "from": from, "to": me.path, "at": now}})
	if err != nil {
		return nil, mine, nil, holder, fmt.Errorf("encode recycle audit: %w", err)
	}
	ld, err := json.Marshal(leaseData{NodeKey: c.cfg.NodeKey, Addr: c.cfg.Advertise, SessionID: sessionHex(c.getConn().SessionID())})
	if err != nil {
		return nil, mine, nil, holder, fmt.Errorf("encode lease data: %w", err)
	}
	// Every take-over sets forever/ (its data records the last one). A
	// take-over of a worker ID nothing names checks the version its scan
	// read first: nothing else here would see another take-over that
	// committed since, whose lease may be gone again. A scan is many reads,
	// not one snapshot, so a take-over of a named ID can fall inside it and
	// make that ID look named by nobody (its owner read after the eviction,
	// its taker before); such a take-over sets forever/ too, so the version
	// check sees it. A take-over of a named ID sets forever/ with no version:
	// the evicted owners' versions serialize every recycler of that ID, and
	// recyclers of different IDs do not contend. (Releases before this one
	// check forever/'s version in every take-over: the unconditional set
	// makes theirs fail after any take-over since their scan began too.)
	switch {
	case len(from) == 0:
		ops = append([]any{&zk.SetDataRequest{Path: c.p.forever, Data: audit, Version: s.parentVersion}}, ops...)
	case !mutation.Broken(mutation.RecycleNamedUnmarked):
		ops = append([]any{&zk.SetDataRequest{Path: c.p.forever, Data: audit, Version: -1}}, ops...)
	}
	ops = append(ops, &zk.CreateRequest{Path: c.p.lease(w), Data: ld, Acl: c.acl, Flags: zk.FlagEphemeral})
	return ops, mine, from, holder, nil
}
