package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// batcher merges the calls for one kind of ID (snowflake IDs, or one tag's
// dense IDs) into requests.
//
// A call that finds no request out and nobody queued does its request
// itself, on its own goroutine: an uncontended call costs a plain GET and
// no hand-off. Calls arriving while MaxInFlight requests are out queue; when
// a slot frees, one goroutine takes every queued call that fits MaxBatch,
// makes one request for all of them and hands each its slice, then takes the
// next batch queued meanwhile, until the queue is empty.
type batcher struct {
	c  *Client
	ep endpoint

	mu       sync.Mutex
	queue    []*call // calls waiting for a batch, in arrival order
	inFlight int     // requests out that hold a slot (≤ MaxInFlight)
	slots    []*slot // requests out, oldest first (stalled ones too)
	stall    *time.Timer
	closed   bool
	queued   atomic.Int32 // len(queue), read without b.mu
}

// requeueYields bounds how long a batch goroutine lets the callers it
// just served queue again before it takes the next batch: while fewer
// have queued than it served, it yields, up to this many times. One yield
// made batches of 42 IDs with 64 callers on a 2-core machine, four made
// 56 (the callers run on both cores; one yield lets only this core's run)
// and 15-20% more IDs/s; more yields added nothing.
const requeueYields = 4

func newBatcher(c *Client, ep endpoint) *batcher { return &batcher{c: c, ep: ep} }

// call is one queued call waiting for its IDs.
type call struct {
	ctx context.Context
	n   int
	out chan result // buffered: a batch never blocks on a caller
}

type result struct {
	ids []int64
	err error
}

// callPool recycles calls (and their channels) whose callers got their
// answer; a call whose caller gave up is left to the garbage collector.
var callPool = sync.Pool{New: func() any { return &call{out: make(chan result, 1)} }}

func (cl *call) release() {
	cl.ctx = nil
	callPool.Put(cl)
}

// get returns n IDs (1 ≤ n ≤ MaxCount), increasing: up to MaxBatch in one
// batch, more in several, sorted.
func (b *batcher) get(ctx context.Context, n int) ([]int64, error) {
	if n < 1 || n > MaxCount {
		b.c.errs.Add(1)
		return nil, &RejectedError{Code: wire.CodeInvalidCount, Message: fmt.Sprintf("next %d %s: want 1..%d", n, b.ep.what, MaxCount)}
	}
	if n <= b.c.cfg.MaxBatch {
		ids, err := b.fetch(ctx, n)
		if err != nil {
			b.c.errs.Add(1)
		}
		return ids, err
	}
	out := make([]int64, 0, n)
	for len(out) < n {
		ids, err := b.fetch(ctx, min(n-len(out), b.c.cfg.MaxBatch))
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

// fetch returns n ≤ MaxBatch IDs from one request.
func (b *batcher) fetch(ctx context.Context, n int) ([]int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("next %s: %w", b.ep.what, err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	if len(b.queue) == 0 && b.inFlight < b.c.cfg.MaxInFlight {
		s := b.holdLocked()
		b.mu.Unlock()
		return b.solo(ctx, s, n)
	}
	cl := callPool.Get().(*call)
	cl.ctx, cl.n = ctx, n
	b.queue = append(b.queue, cl)
	b.queued.Store(int32(len(b.queue)))
	b.startLocked()
	if len(b.queue) > 0 {
		b.armStallLocked() // someone waits for a slot: watch for a stall
	}
	b.mu.Unlock()
	done := ctx.Done()
	if done == nil { // a context that is never cancelled: a plain receive
		r := <-cl.out
		cl.release()
		return r.ids, r.err
	}
	select {
	case r := <-cl.out:
		cl.release()
		if r.err != nil {
			return nil, callerErr(ctx, b.ep.what, r.err)
		}
		return r.ids, nil
	case <-done:
		// Not released: the batch may still send to cl.out; what arrives
		// is dropped with the call.
		return nil, fmt.Errorf("next %s: %w", b.ep.what, ctx.Err())
	}
}

// solo makes the request of one call on its goroutine, in slot s. The
// request's deadline is the context's, if sooner than Timeout; a context
// cancelled without a deadline is seen when the request ends (within
// Timeout per node).
func (b *batcher) solo(ctx context.Context, s *slot, n int) ([]int64, error) {
	deadline, _ := ctx.Deadline()
	ids, err := b.c.serveClamped(&b.ep, n, deadline, func() bool { return ctx.Err() == nil })
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
// queued behind it start a batch of their own on the next node instead of
// waiting for the Timeout. Only a waiting call arms the stall timer: a
// request alone costs no timer.
type slot struct {
	start  time.Time
	gaveUp bool // b.mu
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

// release ends the request of s and starts a batch with the calls queued
// meanwhile, if any.
func (b *batcher) release(s *slot) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropLocked(s)
	b.startLocked()
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

// onStall takes the slots of the requests out longer than StallAfter,
// starts a batch with the queued calls, and re-arms while calls still wait.
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
	for len(b.queue) > 0 && b.inFlight < b.c.cfg.MaxInFlight && !b.closed {
		before := len(b.queue)
		b.startLocked()
		if len(b.queue) == before {
			break // every queued caller gave up
		}
	}
	if len(b.queue) > 0 {
		b.armStallLocked()
	}
}

// startLocked starts a batch with the queued calls if a slot is free.
// b.mu is held.
func (b *batcher) startLocked() {
	if b.closed || b.inFlight >= b.c.cfg.MaxInFlight {
		return
	}
	if batch, total := b.takeLocked(); len(batch) > 0 {
		s := b.holdLocked()
		b.c.done.Add(1)
		go b.run(s, batch, total)
	}
}

// takeLocked removes the next batch from the queue: calls in order while
// their counts fit MaxBatch, skipping callers that gave up. b.mu is held.
func (b *batcher) takeLocked() ([]*call, int) {
	var batch []*call
	total, i := 0, 0
	for ; i < len(b.queue); i++ {
		cl := b.queue[i]
		if cl.ctx.Err() != nil {
			continue // it has returned already; nothing to fetch for it
		}
		if total+cl.n > b.c.cfg.MaxBatch {
			break
		}
		batch, total = append(batch, cl), total+cl.n
	}
	rest := copy(b.queue, b.queue[i:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.queued.Store(int32(len(b.queue)))
	return batch, total
}

// run serves batch in slot s, then the next batch queued meanwhile, until
// the queue is empty, the client closed or the slot was given up.
func (b *batcher) run(s *slot, batch []*call, total int) {
	defer b.c.done.Done()
	for {
		b.serveBatch(batch, total)
		// Let the callers just handed their IDs queue again before the
		// next batch is taken: otherwise it leaves with whoever happened to
		// be queued and they wait a round trip longer.
		for i := 0; i < requeueYields && int(b.queued.Load()) < len(batch); i++ {
			runtime.Gosched()
		}
		b.mu.Lock()
		if !b.closed && !s.gaveUp {
			batch, total = b.takeLocked()
		} else {
			batch = nil
		}
		if len(batch) == 0 {
			b.dropLocked(s)
			b.startLocked() // a slot given up by a stall may be free again
			b.mu.Unlock()
			return
		}
		s.start = time.Now()
		if len(b.queue) > 0 {
			b.armStallLocked()
		}
		b.mu.Unlock()
	}
}

// serveBatch fetches total IDs for batch and hands each caller its slice,
// in order; a caller that gave up gets nothing and its IDs are dropped.
func (b *batcher) serveBatch(batch []*call, total int) {
	// The batch may take as long as its most patient caller allows.
	var deadline time.Time
	for _, cl := range batch {
		d, ok := cl.ctx.Deadline()
		if !ok {
			deadline = time.Time{}
			break
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	ids, err := b.c.serveClamped(&b.ep, total, deadline, func() bool {
		for _, cl := range batch {
			if cl.ctx.Err() == nil {
				return true
			}
		}
		return false
	})
	if err != nil {
		for _, cl := range batch {
			cl.out <- result{err: err}
		}
		return
	}
	b.c.counted(total)
	for _, cl := range batch {
		part := ids[:cl.n:cl.n]
		ids = ids[cl.n:]
		if cl.ctx.Err() == nil {
			cl.out <- result{ids: part}
		}
	}
}

// close fails the queued calls with ErrClosed.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	queued := b.queue
	b.queue = nil
	b.queued.Store(0)
	if b.stall != nil {
		b.stall.Stop()
		b.stall = nil
	}
	b.mu.Unlock()
	for _, cl := range queued {
		cl.out <- result{err: ErrClosed}
	}
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
