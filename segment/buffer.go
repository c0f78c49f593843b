package segment

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// tagBuf is one tag's double buffer on this node. Positions are ordinals:
// the k-th ID this process ever held for the tag (resumed or loaded, in
// order) has ordinal k. issued ≤ permitted ≤ held: IDs below issued are
// handed out; below permitted may be (the state file no longer lists them,
// R2); below held are in memory.
type tagBuf struct {
	svc      *Service
	name     string
	perm     *Permutation  // an opaque tag's; nil for a plain one
	start    int64         // the tag's first counter value (an opaque tag's index 0)
	kick     chan struct{} // wakes the load worker
	markKick chan struct{} // wakes the mark worker

	mu        sync.Mutex
	ranges    []Range // unissued IDs in memory, increasing; ranges[0] is current
	curLen    int64   // ranges[0]'s size when it became current (the 10% rule)
	issued    int64
	permitted int64
	held      int64
	last      int64 // the last ID issued (0: none): later IDs are above it
	want      int   // the largest Take waiting
	step      int64 // the step of the next load (0: the tag's base step)
	base, top int64 // the tag's step and max step, from its record
	lastLoad  time.Time
	loads     int64
	lastErr   error
	closed    bool
	wake      chan struct{} // closed and replaced on every change Takes wait for

	rate       float64 // recent IDs/s, measured at mark writes
	rateAt     time.Time
	rateIssued int64

	lastLoadTook time.Duration
	wasted       atomic.Int64
}

func (b *tagBuf) broadcastLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// kickLoader wakes both workers (each looks whether it has work).
func (b *tagBuf) kickLoader() {
	for _, k := range []chan struct{}{b.kick, b.markKick} {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// chunkLocked is how far the mark moves ahead of issuing: a tenth of the
// current step, or MarkAhead's worth of IDs at the recent rate when that
// is more (so a burst does not wait on the disk), so a crash loses at most
// that.
func (b *tagBuf) chunkLocked() int64 {
	return max(b.step/10, int64(b.rate*b.svc.cfg.MarkAhead.Seconds()), 1)
}

// rateWindow is the shortest window the issue rate is measured over.
const rateWindow = 50 * time.Millisecond

// noteRateLocked updates the recent issue rate (IDs/s) at a mark write.
func (b *tagBuf) noteRateLocked(now time.Time) {
	d := now.Sub(b.rateAt)
	if b.rateAt.IsZero() || d < rateWindow {
		if b.rateAt.IsZero() {
			b.rateAt, b.rateIssued = now, b.issued
		}
		return // too short a window to tell a rate from a burst of a few calls
	}
	r := float64(b.issued-b.rateIssued) / d.Seconds()
	if r > b.rate {
		b.rate = r // rise at once: a burst needs room now
	} else {
		b.rate = (b.rate + r) / 2 // fall gently
	}
	b.rateAt, b.rateIssued = now, b.issued
}

// take hands out n IDs once n are both in memory and below the mark.
func (b *tagBuf) take(ctx context.Context, dst []int64, n int) ([]int64, error) {
	var deadline <-chan time.Time // armed on the first wait: the common case has none
	waited := false
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return dst, ErrClosed
		}
		if min(b.permitted, b.held)-b.issued >= int64(n) {
			dst = b.popLocked(dst, n)
			if b.wantsWorkLocked() {
				b.kickLoader()
			}
			b.mu.Unlock()
			return dst, nil
		}
		b.want = max(b.want, n)
		wake := b.wake
		b.mu.Unlock()
		b.kickLoader()
		if !waited {
			waited = true
			b.svc.stalls.Add(1)
			t := time.NewTimer(b.svc.cfg.Wait)
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return dst, fmt.Errorf("take %d IDs of %q: %w", n, b.name, ctx.Err())
		case <-deadline:
			b.mu.Lock()
			lastErr := b.lastErr
			b.mu.Unlock()
			if lastErr == nil {
				lastErr = errors.New("no range loaded in time")
			}
			return dst, fmt.Errorf("%w: tag %q: %v", ErrUnavailable, b.name, lastErr)
		}
	}
}

// popLocked moves n IDs from the front of ranges to dst.
func (b *tagBuf) popLocked(dst []int64, n int) []int64 {
	for n > 0 {
		r := &b.ranges[0]
		k := min(int64(n), r.Len())
		for id := r.Lo; id < r.Lo+k; id++ {
			dst = append(dst, id)
		}
		r.Lo += k
		n -= int(k)
		b.issued += k
		b.last = r.Lo - 1
		if r.Len() == 0 {
			b.ranges = b.ranges[1:]
			if len(b.ranges) > 0 {
				b.curLen = b.ranges[0].Len()
			}
		}
	}
	if b.want > 0 && b.held-b.issued >= int64(b.want) {
		b.want = 0
	}
	return dst
}

// needLoadLocked: nothing beyond the current range and a tenth of it used
// (Leaf's rule), or less in memory than a waiting Take wants.
func (b *tagBuf) needLoadLocked() bool {
	avail := b.held - b.issued
	if avail < int64(b.want) {
		return true
	}
	switch len(b.ranges) {
	case 0:
		return true
	case 1:
		return b.curLen-b.ranges[0].Len() >= (b.curLen+9)/10
	}
	return false
}

// needMarkLocked: less than half a chunk (or less than a waiting Take
// wants) may be issued before the state file must move the mark.
func (b *tagBuf) needMarkLocked() bool {
	if b.permitted >= b.held {
		return false
	}
	return b.permitted-b.issued < max(b.chunkLocked()/2+1, int64(b.want))
}

func (b *tagBuf) wantsWorkLocked() bool { return b.needLoadLocked() || b.needMarkLocked() }

// unissuedFromLocked lists the IDs held with ordinal ≥ p.
func (b *tagBuf) unissuedFromLocked(p int64) []Range {
	skip := max(p-b.issued, 0)
	var out []Range
	for _, r := range b.ranges {
		if skip >= r.Len() {
			skip -= r.Len()
			continue
		}
		out = append(out, Range{Lo: r.Lo + skip, Hi: r.Hi})
		skip = 0
	}
	return out
}

// The two kinds of work on a tag, each on a goroutine of its own.
type work int

const (
	markWork work = iota // move the state file's mark (local)
	loadWork             // load the next range (ZooKeeper)
)

func (k work) String() string {
	if k == markWork {
		return "state write"
	}
	return "range load"
}

// worker does one kind of work for the Takes until the service closes:
// moving the mark (the state file) or loading ranges (ZooKeeper). They run
// apart so that a ZooKeeper that hangs (an Alloc waits up to LoadTimeout)
// never stops the mark, and the IDs already in memory stay issuable. A
// failed operation is kept for the Takes' errors and not retried before a
// growing pause.
func (b *tagBuf) worker(kind work, kick <-chan struct{}) {
	defer b.svc.wg.Done()
	var rc retryClock
	var retry <-chan time.Time
	for {
		select {
		case <-b.svc.stop:
			return
		case <-kick:
		case <-retry:
		}
		retry = nil
		for {
			select {
			case <-b.svc.stop:
				return // between operations: a range loaded is in b.ranges
			default:
			}
			now := time.Now()
			b.mu.Lock()
			need := b.needLoadLocked()
			if kind == markWork {
				b.noteRateLocked(now)
				need = b.needMarkLocked()
			}
			target := b.issued + max(b.chunkLocked(), int64(b.want))
			b.mu.Unlock()
			if !need {
				break
			}
			if !rc.due(now) {
				retry = time.After(rc.wait(now, true))
				break
			}
			var err error
			if kind == markWork {
				err = b.svc.persist(b, target)
			} else {
				err = b.load()
			}
			if err == nil {
				rc.ok()
				continue
			}
			rc.failed(now)
			b.mu.Lock()
			b.lastErr = err
			b.broadcastLocked()
			b.mu.Unlock()
			b.svc.cfg.Log.Warn().Err(err).Str("tag", b.name).Stringer("work", kind).Msg("segment: range load or state write failed; retrying")
		}
	}
}

// retryClock spaces the retries of one kind of operation: 50ms after the
// first failure, doubling up to 2s, back to none after a success.
type retryClock struct {
	at      time.Time
	backoff time.Duration
}

func (r *retryClock) due(now time.Time) bool { return !now.Before(r.at) }

func (r *retryClock) ok() { r.at, r.backoff = time.Time{}, 0 }

func (r *retryClock) failed(now time.Time) {
	r.backoff = min(max(2*r.backoff, 50*time.Millisecond), 2*time.Second)
	r.at = now.Add(r.backoff)
}

// wait is how long until a needed retry is due (a large value when not
// needed or already due: the caller takes the minimum).
func (r *retryClock) wait(now time.Time, needed bool) time.Duration {
	if !needed || r.due(now) {
		return time.Hour
	}
	return r.at.Sub(now)
}

// load takes one range from the store (above every ID held or issued, so
// the node's IDs keep increasing), adjusts the step, and writes the state
// file so a crash can resume it.
func (b *tagBuf) load() error {
	b.mu.Lock()
	known := b.base > 0
	b.mu.Unlock()
	if !known { // resumed from the state file: learn the tag's steps first
		ctx, cancel := context.WithTimeout(b.svc.ctx, b.svc.cfg.LoadTimeout)
		t, err := b.svc.cfg.Store.Tag(ctx, b.name)
		cancel()
		if err != nil {
			return fmt.Errorf("read tag %q: %w", b.name, err)
		}
		b.mu.Lock()
		b.setTagLocked(t)
		b.mu.Unlock()
	}
	b.mu.Lock()
	now := b.svc.cfg.Now()
	step := b.step
	if !b.lastLoad.IsZero() && b.base > 0 {
		step = NextStep(step, b.base, b.top, now.Sub(b.lastLoad), b.svc.cfg.LongRange)
	}
	step = max(step, b.base, int64(b.want))
	above := b.last + 1
	if n := len(b.ranges); n > 0 {
		above = b.ranges[n-1].Hi
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(b.svc.ctx, b.svc.cfg.LoadTimeout)
	defer cancel()
	began := time.Now()
	r, t, err := b.svc.cfg.Store.Alloc(ctx, b.name, step, above)
	took := time.Since(began)
	if err != nil {
		return fmt.Errorf("load a range of %q: %w", b.name, err)
	}
	b.mu.Lock()
	b.setTagLocked(t)
	b.step = min(max(step, b.base), b.top)
	b.ranges = append(b.ranges, r)
	if len(b.ranges) == 1 {
		b.curLen = r.Len()
	}
	b.held += r.Len()
	b.lastLoad, b.lastLoadTook, b.lastErr = now, took, nil
	b.loads++
	held := append([]Range(nil), b.ranges...)
	issued := b.issued
	b.broadcastLocked()
	b.mu.Unlock()
	b.svc.cfg.Log.Debug().Str("tag", b.name).Stringer("range", r).Int64("above", above).Int64("issued", issued).
		Dur("took", took).Msg("segment: range loaded")
	// Persist the new range (and the mark) at once, before anything else
	// that talks to ZooKeeper: a crash from here on resumes it (the holder
	// record is only for operators, and can hang for LoadTimeout).
	b.mu.Lock()
	target := b.issued + max(b.chunkLocked(), int64(b.want))
	b.mu.Unlock()
	err = b.svc.persist(b, target)
	if perr := b.svc.cfg.Store.Publish(ctx, b.name, b.svc.cfg.Holder, held); perr != nil {
		b.svc.cfg.Log.Debug().Err(perr).Str("tag", b.name).Msg("segment: publish holder record")
	}
	return err
}

// setTagLocked takes the tag's base and max step from its record.
func (b *tagBuf) setTagLocked(t Tag) {
	b.base, b.top = max(t.Step, 1), max(t.MaxStep, t.Step, 1)
	b.step = min(max(b.step, b.base), b.top)
}

// NextStep is Leaf's dynamic step: it doubles (up to top) when the last
// range lasted less than longRange/2, halves (down to base) when it lasted
// more than longRange, and stays otherwise.
func NextStep(step, base, top int64, lasted, longRange time.Duration) int64 {
	switch {
	case lasted < longRange/2:
		return max(min(step*2, top), base)
	case lasted > longRange:
		return min(max(step/2, base), top)
	}
	return min(max(step, base), top)
}
