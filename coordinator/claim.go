package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"snowflaked/clock"
	"snowflaked/snowflake"
)

// errRestart: what Claim read changed under it; start over from the listing.
var errRestart = errors.New("forever znode changed while claiming")

// maxClaimRounds bounds Claim's start-overs.
const maxClaimRounds = 10

// Claim connects to ZooKeeper and establishes this node's worker ID: it
// makes sure the cluster znodes exist with this layout, finds or creates this
// node key's forever znode, takes the worker ID (recycling one when the
// sequence is past the worker bits) and its ephemeral lease. Errors wrap
// ErrZKUnavailable, ErrLayoutMismatch, ErrLeaseHeld or ErrNoFreeWorkerID
// when they are about those; after ErrZKUnavailable the node may serve from
// its cache (ResumeFromCache), after any error it must Close.
func (c *Coordinator) Claim(ctx context.Context) (Identity, error) {
	c.mu.Lock()
	if c.st.closed || c.st.mode != modeNone {
		c.mu.Unlock()
		return Identity{}, errors.New("claim worker id: coordinator already claimed, resumed or closed")
	}
	c.mu.Unlock()
	id, err := c.claim(ctx)
	if err != nil {
		return Identity{}, fmt.Errorf("claim worker id: %w", err)
	}
	return id, nil
}

func (c *Coordinator) claim(ctx context.Context) (Identity, error) {
	conn, err := c.connect(ctx)
	if err != nil {
		return Identity{}, err
	}
	z := zkc{conn, c.opTimeout}
	if err := c.retry(ctx, "ensure cluster znodes", func(ctx context.Context) error { return c.ensureCluster(ctx, z) }); err != nil {
		return Identity{}, err
	}
	for round := 1; round <= maxClaimRounds; round++ {
		node, err := c.findOrCreateForever(ctx, z)
		if err != nil {
			return Identity{}, err
		}
		var id Identity
		var sess int64
		if node.workerID == noWorker {
			node, id, sess, err = c.recycle(ctx, z, node)
		} else {
			id = Identity{WorkerID: node.workerID, Fence: node.data.Fence, Path: node.path}
			if err = c.checkSoleClaim(ctx, z, node); err == nil {
				sess, err = c.takeLease(ctx, z, node)
			}
		}
		if errors.Is(err, errRestart) {
			c.log.Debug().Int("round", round).Msg("forever znode changed while claiming; starting over")
			continue
		}
		if err != nil {
			return Identity{}, err
		}
		c.mu.Lock()
		c.st.mode, c.st.workerID, c.st.path, c.st.version, c.st.data = modeClaimed, id.WorkerID, node.path, node.version, node.data
		c.st.verified, c.st.leaseHeld, c.st.leaseSession, c.st.leaseDetail = true, true, sess, ""
		c.st.lastGood, c.st.lastGoodSet, c.st.zkFence = c.clk.Mono(), true, id.Fence
		c.mu.Unlock()
		c.log.Info().Int64("worker_id", id.WorkerID).Str("forever", id.Path).Int64("fence", id.Fence).
			Bool("recycled", id.Recycled).Str("session", sessionHex(sess)).Msg("claimed worker ID")
		c.updateChecks(true)
		c.poke()
		return id, nil
	}
	return Identity{}, fmt.Errorf("this node key's forever znode kept changing: gave up after %d rounds", maxClaimRounds)
}

// poke wakes Run.
func (c *Coordinator) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// ensureCluster creates the cluster znodes as needed and checks the layout.
func (c *Coordinator) ensureCluster(ctx context.Context, z zkc) error {
	want, err := json.Marshal(c.cfg.Layout)
	if err != nil {
		return fmt.Errorf("encode layout: %w", err)
	}
	if err := z.ensure(ctx, rootPath, nil, c.rootACL); err != nil {
		return err
	}
	if err := z.ensure(ctx, c.p.cluster, want, c.acl); err != nil {
		return err
	}
	b, _, err := z.get(ctx, c.p.cluster)
	if err != nil {
		return fmt.Errorf("read %s: %w", c.p.cluster, err)
	}
	var got snowflake.Layout
	if err := json.Unmarshal(b, &got); err != nil {
		return fmt.Errorf("cluster znode %s holds malformed layout data %s: %v", c.p.cluster, quoteShort(b), err)
	}
	if !got.Equal(c.cfg.Layout) {
		return fmt.Errorf("%w: cluster %q in ZooKeeper uses layout %s, this node is configured with %s",
			ErrLayoutMismatch, c.cfg.Cluster, got.Describe(), c.cfg.Layout.Describe())
	}
	for _, p := range []string{c.p.forever, c.p.leases, c.p.alive} {
		if err := z.ensure(ctx, p, nil, c.acl); err != nil {
			return err
		}
	}
	return nil
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
func (c *Coordinator) readForever(ctx context.Context, z zkc, name, key string, seq int64) (*foreverNode, error) {
	path := c.p.forever + "/" + name
	b, st, err := z.get(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return decodeForeverNode(c.p, name, key, seq, b, st, c.cfg.Layout.MaxWorkerID())
}

func decodeForeverNode(p paths, name, key string, seq int64, b []byte, st *zk.Stat, maxID int64) (*foreverNode, error) {
	n := &foreverNode{name: name, path: p.forever + "/" + name, key: key, seq: seq, version: st.Version}
	d, id, err := decodeForever(b, key, seq, maxID)
	n.data, n.workerID = d, id
	if err != nil {
		n.workerID = noWorker
		return n, &malformedError{n.path, err}
	}
	return n, nil
}

// findOwn finds this node key's forever znode (the lowest if several), or
// returns nil. It never creates one.
func (c *Coordinator) findOwn(ctx context.Context, z zkc) (*foreverNode, error) {
	names, err := z.children(ctx, c.p.forever)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", c.p.forever, err)
	}
	type cand struct {
		name string
		seq  int64
	}
	var mine []cand
	for _, n := range names {
		key, seq, err := parseForeverName(n)
		if err != nil {
			c.log.Warn().Err(err).Str("dir", c.p.forever).Msg("skipping a znode that is not a forever znode")
			continue
		}
		if key == c.cfg.NodeKey {
			mine = append(mine, cand{n, seq})
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
		return nil, fmt.Errorf("%w: %v", zk.ErrConnectionClosed, err) // vanished between list and read: list again
	}
	return node, err
}

// findOrCreateForever returns this node key's forever znode, creating it if
// there is none. A create that failed for connection reasons may have
// succeeded, so it lists again before creating again: a retry never leaves a
// second znode for the key.
func (c *Coordinator) findOrCreateForever(ctx context.Context, z zkc) (*foreverNode, error) {
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
		now := clock.UnixMilli(c.clk)
		data, err := json.Marshal(foreverData{NodeKey: c.cfg.NodeKey, Addr: c.cfg.Advertise, LastTS: now, Updated: now})
		if err != nil {
			return nil, fmt.Errorf("encode forever data: %w", err)
		}
		path, err := z.create(ctx, c.p.foreverPrefix(c.cfg.NodeKey), data, zk.FlagSequence, c.acl)
		if err == nil {
			c.log.Info().Str("forever", path).Msg("created this node key's forever znode")
			continue // read it back through the listing: one code path decides
		}
		if !transient(err) {
			return nil, fmt.Errorf("create forever znode for node key %q: %w", c.cfg.NodeKey, authHint(err))
		}
		if ctx.Err() != nil || time.Since(start) >= c.cfg.ConnectTimeout {
			return nil, fmt.Errorf("create forever znode: %w: %v", ErrZKUnavailable, err)
		}
		c.log.Warn().Err(err).Msg("creating the forever znode failed with its outcome unknown; listing before trying again")
	}
	return nil, fmt.Errorf("create forever znode for node key %q: no znode after 20 attempts", c.cfg.NodeKey)
}

// checkSoleClaim makes sure no other forever znode names node's worker ID
// (only hand-edited or foreign znodes can), and that no undecodable znode
// carries its number as sequence: the ID is then not used, whatever the
// lease says.
func (c *Coordinator) checkSoleClaim(ctx context.Context, z zkc, node *foreverNode) error {
	var s *scan
	if err := c.retry(ctx, "scan worker IDs", func(ctx context.Context) error {
		var err error
		s, err = c.scanCluster(ctx, z)
		return err
	}); err != nil {
		return err
	}
	for _, o := range s.claimers[node.workerID] {
		if o.path != node.path {
			return fmt.Errorf("worker ID %d is named by both %s and %s (edited by hand?): refusing to use it; fix the data of one of them",
				node.workerID, node.path, o.path)
		}
	}
	for _, path := range s.malformed {
		if o := s.byPath[path]; o.seq == node.workerID && o.path != node.path {
			return fmt.Errorf("worker ID %d may be held by %s, whose data is malformed: refusing to use it; fix or delete that znode",
				node.workerID, path)
		}
	}
	return nil
}

// leaseResult is the outcome of one attempt to take a lease.
type leaseResult int8

const (
	leaseTaken        leaseResult = iota // we hold it
	leaseNodeChanged                     // our forever znode changed: re-read it
	leaseHeldByOurKey                    // another session of this node key holds it
	leaseHeldByOther                     // another node key holds it
)

// tryLease makes one attempt to create leases/<id> atomically with a check
// that node still has the version we read (so it still maps our key to id).
// When the version check fails while the lease is held by another session
// (a live process of this node key keeps reporting to the same forever
// znode), the holder is reported, not a changed node: re-reading the node
// would only lose the race again at the holder's next report.
func (c *Coordinator) tryLease(ctx context.Context, z zkc, node *foreverNode) (res leaseResult, session int64, holder string, err error) {
	lp := c.p.lease(node.workerID)
	ld, err := json.Marshal(leaseData{NodeKey: c.cfg.NodeKey, Addr: c.cfg.Advertise, SessionID: sessionHex(z.conn.SessionID())})
	if err != nil {
		return 0, 0, "", fmt.Errorf("encode lease data: %w", err)
	}
	failed, err := z.multi(ctx,
		&zk.CheckVersionRequest{Path: node.path, Version: node.version},
		&zk.CreateRequest{Path: lp, Data: ld, Acl: c.acl, Flags: zk.FlagEphemeral})
	changed := false
	switch {
	case err == nil:
	case failed == 0 && (errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode)):
		changed = true
	case failed == 1 && errors.Is(err, zk.ErrNodeExists):
	case failed == 1 && errors.Is(err, zk.ErrNoNode):
		return 0, 0, "", fmt.Errorf("take lease %s: %w: the leases znode is missing", lp, err)
	default:
		return 0, 0, "", fmt.Errorf("take lease %s: %w", lp, authHint(err))
	}
	b, st, err := z.get(ctx, lp)
	if errors.Is(err, zk.ErrNoNode) && changed {
		return leaseNodeChanged, 0, "", nil
	}
	if errors.Is(err, zk.ErrNoNode) {
		return 0, 0, "", fmt.Errorf("lease %s vanished right after the attempt: %w", lp, zk.ErrConnectionClosed) // transient: try again
	}
	if err != nil {
		return 0, 0, "", fmt.Errorf("read lease %s: %w", lp, err)
	}
	if sid := z.conn.SessionID(); st.EphemeralOwner == sid && sid != 0 {
		return leaseTaken, sid, "", nil
	}
	holder = describeHolder(b, st)
	if d, err := decodeLease(b); err == nil && d.NodeKey == c.cfg.NodeKey {
		return leaseHeldByOurKey, 0, holder, nil
	}
	return leaseHeldByOther, 0, holder, nil
}

// takeLease takes node's lease for Claim. A lease held by another session of
// this node key is most likely a crashed predecessor's, which lingers until
// its session times out: wait (bounded by session timeout + margin) for it to
// vanish. A live holder is never displaced.
func (c *Coordinator) takeLease(ctx context.Context, z zkc, node *foreverNode) (int64, error) {
	var waitUntil time.Time
	wait := c.staleLeaseWait()
	for attempt := 1; attempt <= 1000; attempt++ {
		var res leaseResult
		var sess int64
		var holder string
		if err := c.retry(ctx, "take lease", func(ctx context.Context) error {
			var err error
			res, sess, holder, err = c.tryLease(ctx, z, node)
			return err
		}); err != nil {
			return 0, err
		}
		switch res {
		case leaseTaken:
			return sess, nil
		case leaseNodeChanged:
			return 0, errRestart
		case leaseHeldByOther:
			return 0, fmt.Errorf("%w: worker ID %d (forever znode %s) is leased by %s", ErrLeaseHeld, node.workerID, node.path, holder)
		}
		if waitUntil.IsZero() {
			waitUntil = time.Now().Add(wait)
			c.log.Warn().Int64("worker_id", node.workerID).Str("holder", holder).Dur("max_wait", wait).
				Msg("lease held by another session of this node key (a crashed predecessor?): waiting for it to expire")
		}
		if !time.Now().Before(waitUntil) {
			return 0, fmt.Errorf("%w: worker ID %d is leased by %s, another session of this node key, still after waiting %v: is another process running with node key %q?",
				ErrLeaseHeld, node.workerID, holder, wait, c.cfg.NodeKey)
		}
		c.waitGone(ctx, z, c.p.lease(node.workerID), waitUntil)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("waiting for the lease of worker ID %d held by %s: %w", node.workerID, holder, ctx.Err())
		}
	}
	return 0, fmt.Errorf("take lease on worker ID %d: too many attempts", node.workerID)
}

// waitGone waits until path is deleted, until, ctx ends, or 500ms pass.
func (c *Coordinator) waitGone(ctx context.Context, z zkc, path string, until time.Time) {
	ok, ch, err := z.existsW(ctx, path)
	if err != nil || !ok {
		return
	}
	t := time.NewTimer(max(min(time.Until(until), 500*time.Millisecond), time.Millisecond))
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

// scan is a consistent-enough picture of the worker-ID space for recycling.
// Its parentVersion is read first: a recycling multi sets the forever
// parent's data with that version, so any recycle committed after the scan
// began makes it fail.
type scan struct {
	parentVersion int32
	byPath        map[string]*foreverNode
	malformed     []string // forever znodes whose data cannot be decoded
	claimers      map[int64][]*foreverNode
	leased        map[int64]bool
}

func (c *Coordinator) scanCluster(ctx context.Context, z zkc) (*scan, error) {
	_, pst, err := z.get(ctx, c.p.forever)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", c.p.forever, err)
	}
	s := &scan{parentVersion: pst.Version, byPath: map[string]*foreverNode{}, claimers: map[int64][]*foreverNode{}, leased: map[int64]bool{}}
	names, err := z.children(ctx, c.p.forever)
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
	got, err := z.getMany(ctx, paths)
	if err != nil {
		return nil, err
	}
	maxID := c.cfg.Layout.MaxWorkerID()
	for i, n := range ok {
		if got[i] == nil {
			continue // deleted meanwhile
		}
		node, err := decodeForeverNode(c.p, n.name, n.key, n.seq, got[i].data, got[i].stat, maxID)
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
	leases, err := z.children(ctx, c.p.leases)
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

// free lists the worker IDs that may be taken over at now (unix ms): no
// lease, and every forever znode claiming it (if any) last reported more
// than recycleAfter ago. summary describes the space for ErrNoFreeWorkerID.
func (s *scan) free(maxID, now int64, recycleAfter time.Duration) (ids []int64, summary string) {
	var leased, fresh int
	cutoff := now - recycleAfter.Milliseconds()
	for id := int64(0); id <= maxID; id++ {
		if s.leased[id] {
			leased++
			continue
		}
		recent := false
		for _, n := range s.claimers[id] {
			if n.lastSeen() >= cutoff {
				recent = true
			}
		}
		if recent {
			fresh++
			continue
		}
		ids = append(ids, id)
	}
	return ids, fmt.Sprintf("all %d worker IDs are taken: %d hold a lease, %d more reported within the last %v (recycle-after)",
		maxID+1, leased, fresh, recycleAfter)
}

// recycle takes over a free worker ID for own, whose sequence is past the
// worker bits (or whose ID was taken over). One multi, all version-checked:
// bump the forever parent (serializes recyclers), evict every forever znode
// still naming the ID, set own's worker_id, create the lease.
func (c *Coordinator) recycle(ctx context.Context, z zkc, own *foreverNode) (*foreverNode, Identity, int64, error) {
	maxID := c.cfg.Layout.MaxWorkerID()
	attempts := int(min(maxID+1, 4096)) + 10
	start := time.Now()
	for attempt := 1; attempt <= attempts; attempt++ {
		var s *scan
		if err := c.retry(ctx, "scan worker IDs for recycling", func(ctx context.Context) error {
			var err error
			s, err = c.scanCluster(ctx, z)
			return err
		}); err != nil {
			return nil, Identity{}, 0, err
		}
		me := s.byPath[own.path]
		switch {
		case me == nil:
			return nil, Identity{}, 0, errRestart // our forever znode vanished
		case me.workerID != noWorker:
			return nil, Identity{}, 0, errRestart // it got an ID meanwhile (e.g. our last multi's answer was lost)
		}
		if len(s.malformed) > 0 {
			return nil, Identity{}, 0, fmt.Errorf("recycling refused: forever znode(s) %s have malformed data, so the worker IDs they hold are unknown; fix or delete them",
				strings.Join(s.malformed, ", "))
		}
		now := clock.UnixMilli(c.clk)
		ids, summary := s.free(maxID, now, c.cfg.RecycleAfter)
		if len(ids) == 0 {
			return nil, Identity{}, 0, fmt.Errorf("%w: sequence %d of %s is past worker ID %d (layout %s) and %s",
				ErrNoFreeWorkerID, own.seq, own.path, maxID, c.cfg.Layout, summary)
		}
		w := ids[rand.IntN(len(ids))]
		ops, mine, fence, from, err := c.recycleOps(s, me, w, now)
		if err != nil {
			return nil, Identity{}, 0, err
		}
		failed, err := z.multi(ctx, ops...)
		if err == nil {
			_, st, gerr := z.get(ctx, c.p.lease(w))
			if gerr != nil || st.EphemeralOwner != z.conn.SessionID() {
				continue // the session changed right after: the next scan shows what we own
			}
			node := *me
			node.version, node.data, node.workerID = me.version+1, mine, w
			c.log.Warn().Int64("worker_id", w).Strs("from", from).Int64("fence", fence).Str("forever", me.path).
				Msg("took over a recycled worker ID (its previous owner held no lease and had not reported for longer than recycle-after)")
			return &node, Identity{WorkerID: w, Fence: fence, Path: me.path, Recycled: true}, st.EphemeralOwner, nil
		}
		switch {
		case transient(err):
			if ctx.Err() != nil || time.Since(start) >= c.cfg.ConnectTimeout {
				return nil, Identity{}, 0, fmt.Errorf("recycle worker ID %d: %w: %v", w, ErrZKUnavailable, err)
			}
			c.log.Warn().Err(err).Int64("worker_id", w).Msg("recycling multi failed with its outcome unknown; scanning again")
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
			c.log.Debug().Err(err).Int("op", failed).Int64("worker_id", w).Msg("lost a recycling race; scanning again")
		default:
			return nil, Identity{}, 0, fmt.Errorf("recycle worker ID %d: %w", w, authHint(err))
		}
	}
	return nil, Identity{}, 0, fmt.Errorf("recycling: gave up after %d attempts contended by other nodes", attempts)
}

// recycleOps builds the take-over multi for worker ID w.
func (c *Coordinator) recycleOps(s *scan, me *foreverNode, w, now int64) (ops []any, mine foreverData, fence int64, from []string, err error) {
	none := int64(noWorker)
	for _, prev := range s.claimers[w] {
		fence = max(fence, prev.data.Fence, prev.data.LastTS)
		from = append(from, prev.path)
		d := prev.data
		wid := w
		d.WorkerID, d.PrevWorkerID, d.RecycledTo, d.Updated = &none, &wid, me.path, now
		b, err := json.Marshal(d)
		if err != nil {
			return nil, mine, 0, nil, fmt.Errorf("encode evicted forever data: %w", err)
		}
		ops = append(ops, &zk.SetDataRequest{Path: prev.path, Data: b, Version: prev.version})
	}
	if len(from) == 0 {
		c.log.Warn().Int64("worker_id", w).Msg("no forever znode names this worker ID (deleted by hand?): no fence to carry over")
	}
	mine = me.data
	wid := w
	mine.WorkerID, mine.PrevWorkerID, mine.RecycledTo = &wid, nil, ""
	mine.NodeKey, mine.Addr, mine.LastTS, mine.Fence, mine.Updated = c.cfg.NodeKey, c.cfg.Advertise, now, fence, now
	mine.RecycledFrom = strings.Join(from, ",")
	b, err := json.Marshal(mine)
	if err != nil {
		return nil, mine, 0, nil, fmt.Errorf("encode forever data: %w", err)
	}
	ops = append(ops, &zk.SetDataRequest{Path: me.path, Data: b, Version: me.version})
	audit, err := json.Marshal(map[string]any{"last_recycle": map[string]any{"worker_id": w, "from": from, "to": me.path, "at": now}})
	if err != nil {
		return nil, mine, 0, nil, fmt.Errorf("encode recycle audit: %w", err)
	}
	ld, err := json.Marshal(leaseData{NodeKey: c.cfg.NodeKey, Addr: c.cfg.Advertise, SessionID: sessionHex(c.getConn().SessionID())})
	if err != nil {
		return nil, mine, 0, nil, fmt.Errorf("encode lease data: %w", err)
	}
	ops = append([]any{&zk.SetDataRequest{Path: c.p.forever, Data: audit, Version: s.parentVersion}}, ops...)
	ops = append(ops, &zk.CreateRequest{Path: c.p.lease(w), Data: ld, Acl: c.acl, Flags: zk.FlagEphemeral})
	return ops, mine, fence, from, nil
}
