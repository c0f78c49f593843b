package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// batcher merges the calls for one kind of ID (snowflake IDs, or one tag's
// dense IDs) into requests.
//
// A call that finds a free slot and nobody waiting does its request itself,
// on its own goroutine: an uncontended call costs a plain GET and no
// hand-off. While MaxInFlight requests are out, calls join the open batch:
// an atomic add on the batch's state reserves the call's IDs (its offset
// into the answer), without b.mu. When a slot frees, the open batch is
// sealed and served in it; the batch publishes its answer once and closes
// one channel, which wakes all its callers, each reading its own slice.
// Each request holds one slot and its own connection, so up to MaxInFlight
// batches are out at once.
type batcher struct {
	c  *Client
	ep endpoint

	// open is the batch that calls join without b.mu; it is replaced or
	// cleared under b.mu. It is set only while every slot is taken (or
	// calls wait in full): a free slot takes it at once.
	open atomic.Pointer[batch]

	mu       sync.Mutex
	full     []*batch // sealed batches waiting for a slot, oldest first
	inFlight int      // requests out that hold a slot (≤ MaxInFlight)
	slots    []*slot  // requests out, oldest first (stalled ones too)
	stall    *time.Timer
	closed   bool
}

func newBatcher(c *Client, ep endpoint) *batcher { return &batcher{c: c, ep: ep} }

// batch is one request shared by the calls that joined it.
//
// state packs the IDs reserved (bits 0-31), the calls joined (bits
// 32-62) and whether it is sealed (bit 63). A call joins with one
// compare-and-swap, which gives it its offset; sealing (under b.mu) sets
// bit 63, after which no call joins and the counts are final.
type batch struct {
	state atomic.Uint64
	// deadline is the latest deadline of the calls joined, in ns after
	// monoBase; noDeadline when one has none. A call raises it before it
	// joins, so the seal sees every joined call's deadline.
	deadline atomic.Int64
	left     atomic.Int32 // joined calls that gave up
	// back counts the joined calls that left wait (bits 0-31); bit 32 is
	// set by the batch's goroutine when it waits for them all (gather).
	back   atomic.Uint64
	gather chan struct{} // the slot's: the last call back signals on it

	joined, total int // set by seal, before the batch is served

	done chan struct{} // closed once ids or err is set
	ids  []int64
	err  error
}

const (
	batchSealed     = 1 << 63
	batchCountMask  = 1<<32 - 1
	batchJoinedUnit = 1 << 32
	noDeadline      = math.MaxInt64
	unsetDeadline   = math.MinInt64
	backGathering   = 1 << 32
)

// monoBase is the origin of batch deadlines: a time with a monotonic clock
// reading, so that deadlines kept as durations after it keep theirs.
var monoBase = time.Now()

func newBatch() *batch {
	bt := &batch{done: make(chan struct{})}
	bt.deadline.Store(unsetDeadline)
	return bt
}

// join reserves n IDs for a call with ctx, unless the batch is sealed or
// they do not fit max; it returns the call's offset into the answer.
func (bt *batch) join(ctx context.Context, n, max int) (int, bool) {
	v := bt.state.Load()
	if v&batchSealed != 0 || int(v&batchCountMask)+n > max {
		return 0, false
	}
	d := int64(noDeadline)
	if dl, ok := ctx.Deadline(); ok {
		d = int64(dl.Sub(monoBase))
	}
	// Raised before the call joins: if the join then fails (sealed or full
	// meanwhile), the batch may wait longer than its callers need, for
	// nobody (see want in serveBatch); never shorter.
	for cur := bt.deadline.Load(); cur < d && !bt.deadline.CompareAndSwap(cur, d); cur = bt.deadline.Load() {
	}
	for {
		if v&batchSealed != 0 || int(v&batchCountMask)+n > max {
			return 0, false
		}
		if bt.state.CompareAndSwap(v, v+uint64(n)+batchJoinedUnit) {
			return int(v & batchCountMask), true
		}
		v = bt.state.Load()
	}
}

// seal closes the batch to new calls and fixes its counts. b.mu is held.
func (bt *batch) seal() {
	v := bt.state.Or(batchSealed)
	bt.joined, bt.total = int(v&^batchSealed>>32), int(v&batchCountMask)
}

// publish hands the batch's answer to its callers: one close wakes them
// all.
func (bt *batch) publish(ids []int64, err error) {
	bt.ids, bt.err = ids, err
	close(bt.done)
}

// gathered reports, once the batch is published, whether every joined call
// has left wait already; if not, the last to leave signals on gather.
func (bt *batch) gathered(gather chan struct{}) bool {
	bt.gather = gather
	return int(bt.back.Add(backGathering)&batchCountMask) == bt.joined
}

// leave records a joined call leaving wait: the last one, while the
// batch's goroutine gathers, wakes it.
func (bt *batch) leave() {
	if v := bt.back.Add(1); v&backGathering != 0 && int(v&batchCountMask) == bt.joined {
		bt.gather <- struct{}{}
	}
}

// get returns n IDs (1 ≤ n ≤ MaxCount), increasing: up to MaxBatch in one
// batch, more in several, sorted.
func (b *batcher) get(ctx context.Context, n int) ([]int64, error) {
	if n < 1 || n > MaxCount {
		b.c.errs.Add(1)
		return nil, &RejectedError{Code: wire.CodeInvalidCount, Message: fmt.Sprintf("next %d %s: want 1..%d", n, b.ep.what, MaxCount)}
	}
	most := b.most()
	if most < b.c.cfg.MaxBatch && n > most {
		b.c.errs.Add(1)
		return nil, &RejectedError{Code: wire.CodeInvalidCount, TagMax: most,
			Message: fmt.Sprintf("next %d %s: the tag takes at most %d a request (--max-count)", n, b.ep.what, most)}
	}
	if n <= most {
		ids, err := b.fetch(ctx, n)
		if err != nil {
			b.c.errs.Add(1)
		}
		return ids, err
	}
	out := make([]int64, 0, n)
	for len(out) < n {
		ids, err := b.fetch(ctx, min(n-len(out), most))
		if err != nil {
			b.c.errs.Add(1)
			return nil, err
		}
		out = append(out, ids...)
	}
	// Batches may come from different nodes, whose IDs interleave.
	slices.Sort(out)
	return out, nil
}

// most is the most IDs one request of b asks for: MaxBatch, or less once
// a node named the tag's ceiling (--max-count).
func (b *batcher) most() int {
	if b.ep.tagMax != nil {
		if tm := int(b.ep.tagMax.Load()); tm > 0 && tm < b.c.cfg.MaxBatch {
			return tm
		}
	}
	return b.c.cfg.MaxBatch
}

// fetch returns n ≤ most() IDs from one request.
func (b *batcher) fetch(ctx context.Context, n int) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("next %s: %w", b.ep.what, err)
	}
	if bt := b.open.Load(); bt != nil {
		if off, ok := bt.join(ctx, n, b.most()); ok {
			return b.wait(ctx, bt, off, n)
		}
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	if b.open.Load() == nil && len(b.full) == 0 && b.inFlight < b.c.cfg.MaxInFlight {
		s := b.holdLocked()
		b.mu.Unlock()
		return b.solo(ctx, s, n)
	}
	var bt *batch
	off := 0
	for ok := false; !ok; {
		if bt = b.open.Load(); bt == nil {
			bt = newBatch()
			b.open.Store(bt)
		}
		if off, ok = bt.join(ctx, n, b.most()); !ok {
			// Full: it waits for a slot as it is; the call opens the next.
			bt.seal()
			b.full = append(b.full, bt)
			b.open.Store(nil)
		}
	}
	b.scheduleLocked()
	b.mu.Unlock()
	return b.wait(ctx, bt, off, n)
}

// wait returns the call's n IDs at off in bt once bt is served, or the
// context's error as soon as it ends (the call's IDs are then dropped).
func (b *batcher) wait(ctx context.Context, bt *batch, off, n int) ([]int64, error) {
	if done := ctx.Done(); done == nil { // a context that is never cancelled
		<-bt.done
	} else {
		select {
		case <-bt.done:
		case <-done:
			bt.left.Add(1)
			bt.leave()
			return nil, fmt.Errorf("next %s: %w", b.ep.what, ctx.Err())
		}
	}
	bt.leave()
	if bt.err != nil {
		return nil, callerErr(ctx, b.ep.what, bt.err)
	}
	return bt.ids[off : off+n : off+n], nil
}

// solo makes the request of one call on its goroutine, in slot s. The
// request's deadline is the context's, if sooner than Timeout; a context
// cancelled without a deadline is seen when the request ends (within
// Timeout per node).
func (b *batcher) solo(ctx context.Context, s *slot, n int) ([]int64, error) {
	deadline, _ := ctx.Deadline()
	ids, err := b.c.serveClamped(&b.ep, n, deadline, false, func() bool { return ctx.Err() == nil })
	b.release(s)
	if err = callerErr(ctx, b.ep.what, err); err != nil {
		return nil, err // IDs fetched for a caller that gave up are dropped, never kept
	}
	b.c.counted(len(ids))
	return ids, nil
}

// callerErr is what a call whose batch ended with err returns: the
// context's error when the context ended or its deadline passed meanwhile
// (naming the last failure, if any), whatever the batch got, unless the
// client closed or the request was rejected; else err. A nil result means
// the caller takes the IDs.
func callerErr(ctx context.Context, what string, err error) error {
	ctxErr := ctx.Err()
	if d, ok := ctx.Deadline(); ctxErr == nil && ok && !time.Now().Before(d) {
		ctxErr = context.DeadlineExceeded // the request's deadline was the context's
	}
	switch {
	case ctxErr == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrRejected):
		return err
	case err == nil || errors.Is(err, errGaveUp):
		return fmt.Errorf("next %s: %w", what, ctxErr)
	default:
		return fmt.Errorf("next %s: %w (last failure: %v)", what, ctxErr, err)
	}
}

// slot is a request out. It holds one of the MaxInFlight slots until it
// ends or, while calls wait for a slot, until it has been out for
// StallAfter (a node that hangs): then it gives the slot up, so the calls
// waiting behind it start a batch of their own on the next node instead of
// waiting for the Timeout. Only a waiting batch arms the stall timer: a
// request alone costs no timer.
type slot struct {
	start  time.Time
	gaveUp bool          // b.mu
	gather chan struct{} // for the batches served in it (buffered, 1)
}

// holdLocked takes a free slot. b.mu is held.
func (b *batcher) holdLocked() *slot {
	s := &slot{start: time.Now()}
	b.inFlight++
	b.slots = append(b.slots, s)
	return s
}

// dropLocked forgets s, freeing its slot unless a stall gave it up
// already. b.mu is held.
func (b *batcher) dropLocked(s *slot) {
	if i := slices.Index(b.slots, s); i >= 0 {
		b.slots = slices.Delete(b.slots, i, i+1)
	}
	if !s.gaveUp {
		b.inFlight--
	}
}

// release ends the request of s and serves the batches waiting, if any.
func (b *batcher) release(s *slot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropLocked(s)
	b.scheduleLocked()
}

// armStallLocked arms the stall timer for the oldest request holding a
// slot, unless it is armed already. b.mu is held.
func (b *batcher) armStallLocked() {
	if b.stall != nil || b.closed {
		return
	}
	var oldest *slot
	for _, s := range b.slots {
		if !s.gaveUp && (oldest == nil || s.start.Before(oldest.start)) {
			oldest = s
		}
	}
	if oldest != nil {
		b.stall = time.AfterFunc(max(time.Until(oldest.start.Add(b.c.cfg.StallAfter)), 0), b.onStall)
	}
}

// onStall takes the slots of the requests out longer than StallAfter and
// serves the waiting batches in them; it re-arms while a batch waits.
func (b *batcher) onStall() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stall = nil
	now := time.Now()
	for _, s := range b.slots {
		if !s.gaveUp && now.Sub(s.start) >= b.c.cfg.StallAfter {
			s.gaveUp = true
			b.inFlight--
		}
	}
	b.scheduleLocked()
}

// scheduleLocked starts a goroutine for each waiting batch that a free
// slot can take; then, when every slot is taken, makes sure a batch is
// open for the next calls to join without b.mu, and the stall timer
// watches the slots. b.mu is held.
func (b *batcher) scheduleLocked() {
	if b.closed {
		return
	}
	for b.inFlight < b.c.cfg.MaxInFlight {
		bt := b.nextLocked()
		if bt == nil {
			return // nothing waits, a slot is free: the next call goes alone
		}
		s := b.holdLocked()
		b.c.done.Add(1)
		go b.run(s, bt)
	}
	if b.open.Load() == nil {
		b.open.Store(newBatch())
	}
	b.armStallLocked()
}

// nextLocked takes the next batch to serve: the oldest full one, else the
// open one, sealed; nil when no call waits. b.mu is held.
func (b *batcher) nextLocked() *batch {
	if len(b.full) > 0 {
		bt := b.full[0]
		b.full[0] = nil
		b.full = b.full[1:]
		return bt
	}
	bt := b.open.Load()
	if bt == nil {
		return nil
	}
	bt.seal()
	b.open.Store(nil)
	if bt.joined == 0 {
		return nil // opened ahead, nobody came: dropped
	}
	return bt
}

// run serves bt in slot s, then the next batch waiting, until none waits,
// the client closed or the slot was given up.
func (b *batcher) run(s *slot, bt *batch) {
	defer b.c.done.Done()
	s.gather = make(chan struct{}, 1)
	for {
		b.serveBatch(s, bt)
		b.mu.Lock()
		bt = nil
		if !b.closed && !s.gaveUp {
			bt = b.nextLocked()
		}
		if bt == nil {
			b.dropLocked(s)
			b.scheduleLocked() // a slot given up by a stall may be free again
			b.mu.Unlock()
			return
		}
		s.start = time.Now()
		b.scheduleLocked()
		b.mu.Unlock()
	}
}

// serveBatch fetches the IDs of bt and publishes them (or the error) to its
// callers at once; the IDs of a caller that gave up are dropped with it.
//
// Then, unless as many calls have joined the open batch already, it waits
// until every caller of bt has left wait (gather): the callers just woken
// that call again join the open batch before it leaves, instead of waiting
// a round trip for the next one. Without it, with one request in flight,
// the callers split into two groups that take turns, each batch half as
// large. The wait is one wake-up, by the last caller to leave; it holds
// the slot, not a core.
func (b *batcher) serveBatch(s *slot, bt *batch) {
	// The batch may take as long as its most patient caller allows.
	var deadline time.Time
	if d := bt.deadline.Load(); d != noDeadline {
		deadline = monoBase.Add(time.Duration(d))
	}
	ids, err := b.c.serveClamped(&b.ep, bt.total, deadline, bt.joined > 1, func() bool { return int(bt.left.Load()) < bt.joined })
	if err == nil {
		b.c.counted(bt.total)
	}
	gather := true
	if open := b.open.Load(); open != nil {
		gather = int(open.state.Load()&^batchSealed>>32) < bt.joined
	}
	bt.publish(ids, err)
	if gather && !bt.gathered(s.gather) {
		select {
		case <-s.gather:
		case <-b.c.stop:
		}
	}
}

// close fails the waiting calls with ErrClosed.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	waiting := b.full
	b.full = nil
	if bt := b.open.Swap(nil); bt != nil {
		bt.seal()
		waiting = append(waiting, bt)
	}
	if b.stall != nil {
		b.stall.Stop()
		b.stall = nil
	}
	b.mu.Unlock()
	for _, bt := range waiting {
		bt.publish(nil, ErrClosed)
	}
}

// waiting is the number of calls waiting for a slot (for tests).
func (b *batcher) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, bt := range b.full {
		n += bt.joined
	}
	if bt := b.open.Load(); bt != nil {
		n += int(bt.state.Load() &^ batchSealed >> 32)
	}
	return n
}

// errGaveUp: every caller of a batch gave up before it was served.
var errGaveUp = errors.New("every caller gave up")

// serve fetches n IDs of ep, failing over between nodes: up to Attempts
// nodes, each for at most Timeout, none past deadline (zero: none). want
// reports whether anyone still waits for the IDs.
func (c *Client) serve(ep *endpoint, n int, deadline time.Time, want func() bool) ([]int64, error) {
	var triedBuf [4]string
	tried := triedBuf[:0]
	var failures []error
	for range c.cfg.Attempts {
		if !want() {
			return nil, errGaveUp
		}
		node := c.pick(ep.svc, tried)
		if node == "" {
			break
		}
		tried = append(tried, node)
		d := time.Now().Add(c.cfg.Timeout)
		clipped := false
		if !deadline.IsZero() && deadline.Before(d) {
			d, clipped = deadline, true
		}
		ids, err := c.request(node, ep, n, d, clipped)
		if err == nil {
			return ids, nil
		}
		if c.closed.Load() {
			return nil, ErrClosed
		}
		if errors.Is(err, ErrRejected) {
			return nil, err
		}
		if clipped && isTimeout(err) {
			// The callers' deadline passed, not the node's Timeout: no
			// failover, and the node stays in rotation (request did not
			// mark it down).
			return nil, &NoNodeError{What: ep.what, Causes: append(failures, fmt.Errorf("the callers' deadline passed: %w", err))}
		}
		failures = append(failures, err)
		c.failovers.Add(1)
		if h := c.cfg.Hooks.Failover; h != nil {
			h(FailoverEvent{Node: node, Err: err})
		}
		c.log.Warn("snowflaked client: failing over", "node", node, "error", err)
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			break
		}
	}
	return nil, c.noNode(ep, tried, failures)
}

// counted records a batch of n IDs handed out.
func (c *Client) counted(n int) {
	c.batches.Add(1)
	c.handed.Add(int64(n))
	if h := c.cfg.Hooks.Batch; h != nil {
		h(BatchEvent{IDs: n})
	}
}
