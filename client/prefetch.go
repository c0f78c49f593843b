package client

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// prefetchDepth bounds the refill requests out at once.
const prefetchDepth = 4

// chunk is the answer of one refill request: increasing IDs handed out in
// order by an atomic cursor, so a Next from a warm buffer takes no lock.
type chunk struct {
	ids  []int64
	next atomic.Int64 // index of the next ID to hand out (may pass len)
	born time.Time    // when its request left: its IDs are at least this old
}

// prefetch keeps up to Config.Prefetch snowflake IDs fetched ahead, in
// chunks of at most MaxBatch, refilled by up to prefetchDepth requests at
// once whenever fewer than Prefetch are held or on their way.
type prefetch struct {
	c      *Client
	want   int           // IDs to hold
	size   int           // IDs per refill request
	maxAge time.Duration // older chunks are dropped
	kick   chan struct{} // wakes a refill worker

	cur atomic.Pointer[chunk] // the chunk being handed out

	mu       sync.Mutex
	ready    []*chunk      // fetched, waiting to become cur
	held     int           // IDs in ready
	fetching int           // IDs asked for by refills out
	arrived  chan struct{} // closed (and replaced) when a refill ends
}

func newPrefetch(c *Client) *prefetch {
	p := &prefetch{
		c: c, want: c.cfg.Prefetch, maxAge: c.cfg.PrefetchMaxAge,
		size: min(c.cfg.MaxBatch, max(c.cfg.Prefetch/prefetchDepth, 1)),
		kick: make(chan struct{}, 1), arrived: make(chan struct{}),
	}
	for range prefetchDepth {
		c.done.Add(1)
		go p.worker()
	}
	p.wake()
	return p
}

// take hands out the next prefetched ID. With none held it waits for a
// refill on its way (up to ctx), and reports false when there is none
// or it failed: the caller then asks a node itself.
func (p *prefetch) take(ctx context.Context) (int64, bool) {
	for range 3 {
		if id, ok := p.pop(); ok {
			return id, true
		}
		p.mu.Lock()
		if p.fetching == 0 {
			p.mu.Unlock()
			return 0, false
		}
		arrived := p.arrived
		p.mu.Unlock()
		select {
		case <-arrived:
		case <-ctx.Done():
			return 0, false
		}
	}
	return 0, false
}

// pop takes the next ID of the current chunk, moving to the next chunk
// when it is used up or too old.
func (p *prefetch) pop() (int64, bool) {
	for {
		ch := p.cur.Load()
		if ch != nil {
			i := ch.next.Add(1) - 1
			if i < int64(len(ch.ids)) {
				if time.Since(ch.born) <= p.maxAge {
					if i == int64(len(ch.ids)/2) {
						p.wake() // half of it gone: top the buffer up
					}
					return ch.ids[i], true
				}
				ch.next.Store(int64(len(ch.ids))) // too old: drop the rest
			}
		}
		if !p.advance(ch) {
			return 0, false
		}
	}
}

// advance replaces the used-up chunk old by the next ready one that is
// not too old; false when none is ready.
func (p *prefetch) advance(old *chunk) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur.Load() != old {
		return true // another caller moved on already
	}
	for len(p.ready) > 0 {
		ch := p.ready[0]
		p.ready[0] = nil
		p.ready = p.ready[1:]
		p.held -= len(ch.ids)
		if time.Since(ch.born) <= p.maxAge {
			p.cur.Store(ch)
			p.wakeLocked()
			return true
		}
	}
	p.cur.Store(nil)
	p.wakeLocked()
	return false
}

func (p *prefetch) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeLocked()
}

// wakeLocked wakes a worker if fewer IDs are held or on their way than
// wanted. p.mu is held.
func (p *prefetch) wakeLocked() {
	if p.need() > 0 {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// need is how many IDs to ask for: the shortfall, counting the current
// chunk's rest. p.mu is held.
func (p *prefetch) need() int {
	have := p.held + p.fetching
	if ch := p.cur.Load(); ch != nil {
		have += max(len(ch.ids)-int(ch.next.Load()), 0)
	}
	return p.want - have
}

// worker refills the buffer when woken, one request at a time; the kick
// passes on while more is needed, so up to prefetchDepth workers fetch at
// once.
func (p *prefetch) worker() {
	defer p.c.done.Done()
	for {
		select {
		case <-p.c.stop:
			return
		case <-p.kick:
		}
		for {
			p.mu.Lock()
			n := min(p.need(), p.size)
			if n <= 0 {
				p.mu.Unlock()
				break
			}
			p.fetching += n
			p.wakeLocked() // another worker may join
			p.mu.Unlock()

			born := time.Now()
			ids, err := p.c.serveClamped(&p.c.ids.ep, n, born.Add(p.c.cfg.Timeout*time.Duration(p.c.cfg.Attempts)), true, func() bool { return true })
			p.mu.Lock()
			p.fetching -= n
			if err == nil {
				ch := &chunk{ids: ids, born: born}
				if p.cur.Load() == nil {
					p.cur.Store(ch) // nothing is being handed out (and none is ready)
				} else {
					p.ready = append(p.ready, ch)
					p.held += len(ids)
				}
			}
			close(p.arrived) // wake callers waiting for IDs (or to ask themselves)
			p.arrived = make(chan struct{})
			p.mu.Unlock()
			if err != nil {
				if errors.Is(err, ErrClosed) {
					return
				}
				p.c.log.Warn("snowflaked client: prefetch failed", "error", err)
				select { // no busy loop while every node is down
				case <-p.c.stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				break
			}
			p.c.batches.Add(1)
			if h := p.c.cfg.Hooks.Batch; h != nil {
				h(BatchEvent{IDs: len(ids)})
			}
		}
	}
}
