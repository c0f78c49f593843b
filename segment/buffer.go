package segment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
)

// tagBuf is one tag's double buffer on this node. Positions are ordinals:
// the k-th ID this process ever held for the tag (resumed or loaded, in
// order) has ordinal k. issued ≤ permitted ≤ held: IDs below issued are
// handed out; below permitted may be (the state file no longer lists them,
// R2); below held are in memory.
//
// Every range of a buffer is of one incarnation of the tag (inc). A buffer
// whose incarnation is found gone (deleted, perhaps created again) is
// retired: its ranges are dropped (never returned), it leaves the service,
// and the next Take finds the tag afresh (R7).
type tagBuf struct {
	svc      *Service
	name     string
	kick     chan struct{} // wakes the load worker
	markKick chan struct{} // wakes the mark worker
	retired  chan struct{} // closed when the buffer is retired: its workers end

	mu sync.Mutex
	// inc is the incarnation of the ranges; opaque the tag's opaque form
	// (nil: plain). perm (an opaque tag's, the key of inc) and start (the
	// counter's first value, an opaque tag's index 0) are known once
	// verified (state): the store confirmed inc in this process.
	inc       int64
	opaque    *Opaque
	perm      *Permutation
	start     int64
	state     bufState // where the buffer is in its life; changed only by to
	token     bool     // the tag requires a token (from its record, or the state file)
	maxCount  int64    // the tag's per-request ceiling (0: none)
	ranges    []Range  // unissued IDs in memory, increasing; ranges[0] is current
	curLen    int64    // ranges[0]'s size when it became current (the 10% rule)
	issued    int64
	delivered int64 // IDs handed to callers (issued less the values of an opaque tag past its N, lost with their batch)
	permitted int64
	held      int64
	last      int64 // the last ID issued (0: none): later IDs are above it
	want      int   // the largest Take waiting
	step      int64 // the step of the next load (0: the tag's base step)
	base, top int64 // the tag's step and max step, from its record
	lastLoad  time.Time
	loads     int64
	failed    [2]error      // each worker's last error (by work kind) until a load succeeds; see lastErrLocked
	wake      chan struct{} // closed and replaced on every change Takes wait for

	rate       float64 // recent IDs/s, measured at mark writes
	rateAt     time.Time
	rateIssued int64

	lastLoadTook time.Duration
	wasted       atomic.Int64

	// A reset tag's (rule nil: another tag): periods are the bases the
	// tag's record had when last read; period is the newest period served
	// (never one before it again), floor its base: no counter value below
	// it is served. wantPeriod is a period to start (the loader's), passed
	// one the store refused to start (a later one started).
	rule    *ResetRule
	ruleErr error // the tag's reset rule does not compile: it serves nothing
	reset   bool  // a reset tag (known from the state file before the rule): served only once verified
	periods map[string]int64
	period  string
	floor   int64
	pbase   int64 // the period's base: its numbers count from it
	// periodSaved is the period the state file last written holds.
	periodSaved string
	stale       bool // the record no longer has period at pbase (a repaired record): not served at it
	// restartThrough, restartBase and restartFloor: the record's (a
	// repaired record's periods that start again).
	restartThrough string
	restartBase    int64
	restartFloor   int64
	wantPeriod     string
	passed         string

	refusedRequired atomic.Int64 // requests refused for want of a token
	refusedInvalid  atomic.Int64 // requests refused for a wrong token
	tokenLog        tokenFailLog // the log of failed reads of the tag's tokens

	// asked: a Take (or a resumed range) asked the loader for work. Until
	// then a round only watches the tag (kickWatch): a tag no request got
	// past the admission of loads nothing, and still learns of its delete.
	asked atomic.Bool
}

// bufState is where a buffer is in its life (R7). A buffer resumed from
// the state file starts unverified; one made from the store's answer is
// verified at once. Its transitions are all in tagBuf.to.
type bufState uint8

const (
	// bufUnverified: resumed ranges whose incarnation the store has not
	// confirmed in this process; served only once it has, or, for a plain
	// tag, once a Take waited Config.Wait for it (bufTrusted).
	bufUnverified bufState = iota
	// bufTrusted: resumed ranges of a plain tag served unconfirmed (the
	// store did not answer within Config.Wait); checked at its next answer.
	bufTrusted
	// bufVerified: the store confirmed the incarnation in this process.
	bufVerified
	// bufDeleted: a watch reported the incarnation deleted: never served
	// unchecked again; the check verifies it again or retires it.
	bufDeleted
	// bufRetired: the incarnation is gone: the ranges are dropped (never
	// returned) and the buffer is out of the service. Only a close follows.
	bufRetired
	// bufClosed: the service closed (or halted): nothing is issued again.
	// It is final.
	bufClosed
)

// to moves the buffer to state next where its life allows it, and says
// whether it did: a closed buffer stays closed, a retired one becomes only
// closed, and only an unverified buffer becomes trusted. Call with b.mu
// held.
func (b *tagBuf) to(next bufState) bool {
	switch {
	case b.state == bufClosed:
		return false
	case b.state == bufRetired && next != bufClosed:
		return false
	case next == bufTrusted && b.state != bufUnverified:
		return false
	}
	b.state = next
	return true
}

// verifiedLocked: the store confirmed the incarnation in this process.
func (b *tagBuf) verifiedLocked() bool { return b.state == bufVerified }

// retiredLocked: the buffer was retired (its incarnation is gone), closed
// since or not.
func (b *tagBuf) retiredLocked() bool {
	select {
	case <-b.retired:
		return true
	default:
		return false
	}
}

func (b *tagBuf) broadcastLocked() {
	close(b.wake)
	b.wake = make(chan struct{})
}

// kickLoader wakes both workers (each looks whether it has work).
func (b *tagBuf) kickLoader() {
	b.asked.Store(true)
	for _, k := range []chan struct{}{b.kick, b.markKick} {
		select {
		case k <- struct{}{}:
		default:
		}
	}
}

// kickWatch wakes the load worker to watch the tag only (unless a Take
// asked for work meanwhile): a new buffer learns of its tag's delete even
// when no request gets past its admission (a token, a ceiling), so none
// makes the load after which the watch would be armed.
func (b *tagBuf) kickWatch() {
	select {
	case b.kick <- struct{}{}:
	default:
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

// take hands out n IDs once n are both in memory and below the mark,
// checking the request against the tag's ceiling and, when the tag
// requires one, token at every look under b.mu: a buffer resumed from the
// state file learns the tag's record (its ceiling, that it requires a
// token) only once ZooKeeper answers, possibly while the Take waits. The
// token is checked once (without b.mu: the hashes may come from the
// store); a request to a tag without a token takes the lock once.
func (b *tagBuf) take(ctx context.Context, dst []int64, n int, token []byte) ([]int64, string, error) {
	var deadline <-chan time.Time // armed on the first wait: the common case has none
	waited, tokenChecked := false, false
	for {
		b.mu.Lock()
		if b.state == bufClosed {
			b.mu.Unlock()
			return dst, "", ErrClosed
		}
		if b.state == bufRetired {
			b.mu.Unlock()
			return dst, "", errRetired
		}
		needToken, err := b.admitLocked(n)
		if err != nil {
			b.mu.Unlock()
			return dst, "", err
		}
		if needToken && !tokenChecked {
			inc := b.inc
			b.mu.Unlock()
			if err := b.checkToken(ctx, token, inc); err != nil {
				return dst, "", err
			}
			tokenChecked = true
			continue
		}
		key, perr := b.periodLocked()
		if perr != nil {
			b.mu.Unlock()
			return dst, "", perr
		}
		if b.issuableLocked(key, n) {
			dst, err := b.issueLocked(dst, n)
			b.mu.Unlock()
			return dst, key, err
		}
		b.want = max(b.want, n)
		wake := b.wake
		b.mu.Unlock()
		b.kickLoader()
		if !waited {
			waited = true
			b.svc.stalls.Add(1)
			t := clock.NewTimer(b.svc.ctx, b.svc.cfg.Wait)
			defer t.Stop()
			deadline = t.C
		}
		// A token checked before a wait is checked again after it: the
		// hashes it was checked against may have passed their stale
		// limit meanwhile (a cache hit: no ZooKeeper read while fresh).
		tokenChecked = false
		select {
		case <-wake:
		case <-ctx.Done():
			if woke(wake) {
				continue
			}
			return dst, "", fmt.Errorf("take %d IDs of %q: %w", n, b.name, ctx.Err())
		case <-deadline:
			if woke(wake) {
				deadline = expired // looked at once more after the news
				continue
			}
			b.mu.Lock()
			lastErr := b.lastErrLocked()
			if b.opaque == nil && !b.reset && min(b.permitted, b.held)-b.issued >= int64(n) && b.to(bufTrusted) {
				// Resumed ranges the store could not confirm within Wait
				// (ZooKeeper unreachable): served, their incarnation checked
				// at the next answer (R7).
				b.mu.Unlock()
				b.svc.cfg.Log.Warn().Err(lastErr).Str("tag", b.name).Int64("tag_incarnation", b.inc).
					Msg("segment: serving resumed ranges before ZooKeeper confirmed the tag's incarnation")
				continue
			}
			b.mu.Unlock()
			if lastErr == nil {
				lastErr = errors.New("no range loaded in time")
			}
			return dst, "", fmt.Errorf("%w: tag %q: %v", ErrUnavailable, b.name, lastErr)
		}
	}
}

// issuableLocked reports whether n IDs of period key ("" but for a reset
// tag) may be issued now: the buffer serves that period, its incarnation
// is confirmed (or, for a plain tag, trusted), and n IDs lie below the
// state file's mark.
func (b *tagBuf) issuableLocked(key string, n int) bool {
	ready := (b.state == bufVerified || b.state == bufTrusted && b.opaque == nil && !b.reset) && key == b.period && !b.stale && !b.periodUnsavedLocked()
	permitted := b.permitted
	if mutation.Broken(mutation.IssueAboveMark) {
		permitted = b.held
	}
	return ready && min(permitted, b.held)-b.issued >= int64(n)
}

// issueLocked moves n IDs to dst, as the tag hands them out: an opaque
// tag's under its key, a reset tag's as numbers of its period.
func (b *tagBuf) issueLocked(dst []int64, n int) ([]int64, error) {
	orig := len(dst)
	dst = b.popLocked(dst, n)
	var err error
	switch {
	case b.perm != nil:
		dst, err = b.mapLocked(dst, orig)
	case b.rule != nil:
		dst, err = b.numberLocked(dst, orig)
	}
	b.delivered += int64(len(dst) - orig)
	if b.wantsWorkLocked() {
		b.kickLoader()
	}
	return dst, err
}

// woke reports whether wake is closed: news that came with a deadline or
// an end wins over them (select picks among ready cases at random).
func woke(wake <-chan struct{}) bool {
	select {
	case <-wake:
		return true
	default:
		return false
	}
}

// expired is a deadline that has passed (a closed channel).
var expired = func() <-chan time.Time { c := make(chan time.Time); close(c); return c }()

// errRetired: the buffer was retired under a Take; Service.Take looks for
// the tag again.
var errRetired = errors.New("tag buffer retired")

// mapLocked turns an opaque tag's counter values dst[orig:] into their
// numbers under the key of the ranges' incarnation. Values past the tag's N
// are never handed out (they are lost with the batch).
func (b *tagBuf) mapLocked(dst []int64, orig int) ([]int64, error) {
	for i := orig; i < len(dst); i++ {
		id, err := b.perm.ID(dst[i] - b.start)
		if err != nil {
			return dst[:orig], fmt.Errorf("tag %q: %w", b.name, err)
		}
		dst[i] = id
	}
	return dst, nil
}

// periodLocked is the period a Take of a reset tag serves ("" for other
// tags): the period of the node's clock in the tag's zone, or the newest
// period served if that is later (a node's periods never go back). It
// moves the buffer to a later period whose base it knows; for one it does
// not know, it asks the loader to start it (the Take waits). A period the
// store refused to start (a later one started while this node's clock
// lagged) is an error at once.
func (b *tagBuf) periodLocked() (string, error) {
	if b.ruleErr != nil {
		return "", fmt.Errorf("%w: tag %q resets by a rule this node cannot use: %v", ErrUnavailable, b.name, b.ruleErr)
	}
	if b.rule == nil {
		return "", nil
	}
	now, err := b.svc.cfg.PeriodClock()
	if err != nil {
		return "", fmt.Errorf("%w: tag %q resets by period and this node's clock cannot be trusted: %v", ErrUnavailable, b.name, err)
	}
	key := max(b.rule.PeriodOf(now), b.period)
	if key == b.period && !b.stale {
		return key, nil
	}
	if base, ok := b.periods[key]; ok {
		if key == b.period && (key > b.restartThrough || base != b.restartBase) {
			return "", fmt.Errorf("%w: tag %q: the tag's record has period %s at base %d, not at %d, which this node numbers it from, and no repair restarted it", ErrUnavailable, b.name, key, base, b.pbase)
		}
		// A later period; or this one, started again by the repair of a
		// record that forgot its start: numbered from the record's base
		// from the repair's max_id on (movePeriodLocked).
		b.movePeriodLocked(key, base)
		return key, nil
	}
	if key <= b.passed {
		return "", fmt.Errorf("%w: tag %q: this node's clock says period %s, which cannot start: %v", ErrUnavailable, b.name, key, ErrPeriodPassed)
	}
	b.wantPeriod = max(b.wantPeriod, key)
	b.kickLoader()
	return key, nil
}

// movePeriodLocked makes key, of base, the period served: the IDs held
// below base are dropped (counted as wasted), never served in it (R9).
func (b *tagBuf) movePeriodLocked(key string, base int64) {
	floor := base
	if key <= b.restartThrough {
		floor = max(floor, b.restartFloor) // counter values below it may be numbered under the forgotten base
	}
	b.period, b.pbase, b.stale, b.floor = key, base, false, max(b.floor, floor)
	var dropped int64
	for len(b.ranges) > 0 && b.ranges[0].Lo < b.floor {
		r := &b.ranges[0]
		k := min(b.floor, r.Hi) - r.Lo
		r.Lo += k
		b.issued += k
		dropped += k
		if r.Len() == 0 {
			b.ranges = b.ranges[1:]
			if len(b.ranges) > 0 {
				b.curLen = b.ranges[0].Len()
			}
		}
	}
	b.last = max(b.last, b.floor-1)
	b.wasted.Add(dropped)
	if dropped > 0 || b.wantsWorkLocked() {
		b.kickLoader()
	}
	b.broadcastLocked()
}

// numberLocked turns a reset tag's counter values dst[orig:] into their
// numbers in the period served: value - base + start. A number the
// format's width cannot print is never handed out (the batch is lost).
func (b *tagBuf) numberLocked(dst []int64, orig int) ([]int64, error) {
	for i := orig; i < len(dst); i++ {
		if dst[i] < b.floor {
			return dst[:orig], fmt.Errorf("%w: tag %q: counter value %d is below period %s's base %d", ErrUnavailable, b.name, dst[i], b.period, b.floor)
		}
		n := dst[i] - b.pbase + b.start
		if d := dst[i] - b.pbase; d > math.MaxInt64-b.start || n < b.start {
			return dst[:orig], &PeriodExhaustedError{Tag: b.name, Period: b.period, Width: b.rule.Width(), Limit: b.rule.Limit()}
		}
		if n > b.rule.Limit() {
			return dst[:orig], &PeriodExhaustedError{Tag: b.name, Period: b.period, Width: b.rule.Width(), Limit: b.rule.Limit()}
		}
		dst[i] = n
	}
	return dst, nil
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
	if avail < int64(b.want) || b.startPeriodLocked() != "" {
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
	if b.periodUnsavedLocked() {
		return true
	}
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

// lastErrLocked is the error a Take that waited in vain reports (nil:
// none): the range load's when it failed, else the state write's. A fixed
// order, not the later of the two: when both workers fail at one instant
// the message does not depend on which of them ran last.
func (b *tagBuf) lastErrLocked() error {
	if err := b.failed[loadWork]; err != nil {
		return err
	}
	return b.failed[markWork]
}

func (k work) String() string {
	if k == markWork {
		return "state write"
	}
	return "range load"
}

// needWork says whether the worker of kind has work now (the load worker:
// a load a Take asked for, or the check of an unverified buffer; the mark
// worker: a mark to write), and the mark a write would persist.
func (b *tagBuf) needWork(kind work, now time.Time) (need bool, target int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	need = b.needLoadLocked() && b.asked.Load() || !b.verifiedLocked()
	if kind == markWork {
		b.noteRateLocked(now)
		need = b.needMarkLocked()
	}
	return need, b.issued + max(b.chunkLocked(), int64(b.want))
}

// doWork does one piece of the work of kind: a load, or a state write
// persisting target.
func (b *tagBuf) doWork(kind work, target int64) error {
	if kind == markWork {
		return b.svc.persist(b, target)
	}
	return b.load()
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
	var retryT *clock.Timer // the pending retry, if any
	var retry <-chan time.Time
	stopRetry := func() {
		if retryT != nil {
			retryT.Stop()
		}
		retryT, retry = nil, nil
	}
	defer func() { stopRetry() }()
	retryIn := func(d time.Duration) {
		stopRetry()
		retryT = clock.NewTimer(b.svc.ctx, d)
		retry = retryT.C
	}
	// The load worker also keeps a watch on the tag's incarnation (R7): a
	// delete unverifies the buffer at once, and the check that follows
	// retires it.
	watcher, _ := b.svc.cfg.Store.(TagWatcher)
	if kind != loadWork {
		watcher = nil
	}
	var watch <-chan bool
	var armAt time.Time
	unwatch := func() {}
	defer func() { unwatch() }()
	watched := func(deleted bool) {
		watch = nil
		unwatch()
		if deleted {
			b.mu.Lock()
			b.to(bufDeleted)
			b.mu.Unlock()
		}
	}
	for {
		select {
		case <-b.svc.stop:
			return
		case <-b.retired:
			return
		case <-kick:
		case <-retry:
		case deleted := <-watch:
			watched(deleted)
		}
		// What came with the case select picked (it picks among ready ones
		// at random) is taken too, so the round starts the same way
		// whichever it was: the watch's news, a kick (the round looks at
		// what is needed anyway) and the retry (dropped); a stop ends the
		// round before it does anything.
		select {
		case deleted := <-watch:
			watched(deleted)
		default:
		}
		clock.Drain(kick)
		stopRetry()
		for {
			select {
			case <-b.svc.stop:
				return // between operations: a range loaded is in b.ranges
			case <-b.retired:
				return
			default:
			}
			now := time.Now()
			need, target := b.needWork(kind, now)
			if !need && watcher != nil && watch == nil {
				b.mu.Lock()
				verified := b.verifiedLocked()
				b.mu.Unlock()
				if !verified {
					break
				}
				if now.Before(armAt) {
					retryIn(armAt.Sub(now))
					break
				}
				var err error
				if watch, unwatch, err = b.arm(watcher); err != nil {
					armAt = now.Add(time.Second) // ZooKeeper unreachable: the next load finds out anyway
				}
				continue
			}
			if !need {
				break
			}
			if !rc.due(now) {
				retryIn(rc.wait(now, true))
				break
			}
			err := b.doWork(kind, target)
			if err == nil {
				rc.ok()
				continue
			}
			rc.failed(now)
			b.mu.Lock()
			b.failed[kind] = err
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

// verify confirms a resumed buffer's incarnation with the store and learns
// the tag's steps (and an opaque tag's key of that incarnation); a buffer
// whose incarnation is gone is retired.
func (b *tagBuf) verify() error {
	ctx, cancel := clock.WithTimeout(b.svc.ctx, b.svc.cfg.LoadTimeout)
	defer cancel()
	b.mu.Lock()
	inc := b.inc
	b.mu.Unlock()
	t, err := b.svc.cfg.Store.Tag(ctx, b.name)
	if err == nil && t.Incarnation != inc {
		err = fmt.Errorf("tag %q: %w: its ranges are of incarnation %d, the tag's is %d", b.name, ErrTagGone, inc, t.Incarnation)
	}
	var perm *Permutation
	if err == nil {
		perm, err = b.svc.permutation(ctx, b.name, t)
	}
	if errors.Is(err, ErrTagGone) || errors.Is(err, ErrUnknownTag) {
		return b.retire(err)
	}
	if err != nil {
		return fmt.Errorf("read tag %q: %w", b.name, err)
	}
	b.mu.Lock()
	b.setTagLocked(t)
	b.opaque, b.perm = t.Opaque, perm
	b.to(bufVerified)
	b.broadcastLocked()
	b.mu.Unlock()
	return nil
}

// arm sets the watch on the buffer's incarnation, and returns what ends
// it; an incarnation gone already retires the buffer. The watch lives
// until it fires, unwatch is called, or the service stops.
func (b *tagBuf) arm(w TagWatcher) (watch <-chan bool, unwatch func(), err error) {
	ctx, cancel := context.WithCancel(b.svc.ctx)
	b.mu.Lock()
	inc := b.inc
	b.mu.Unlock()
	ch, err := w.WatchTag(ctx, b.name, inc)
	if err != nil {
		cancel()
		if errors.Is(err, ErrTagGone) || errors.Is(err, ErrUnknownTag) {
			return nil, func() {}, b.retire(err)
		}
		return nil, func() {}, err
	}
	return ch, cancel, nil
}

// retire drops the buffer's ranges (never returned: their incarnation is
// gone) and takes it out of the service, its state-file entry with it.
func (b *tagBuf) retire(why error) error {
	s := b.svc
	s.mu.Lock()
	if s.tags[b.name] == b {
		delete(s.tags, b.name)
	}
	s.mu.Unlock()
	b.mu.Lock()
	if b.retiredLocked() {
		b.mu.Unlock()
		return nil
	}
	dropped := b.held - b.issued
	b.to(bufRetired)
	b.ranges, b.held, b.permitted = nil, b.issued, b.issued
	close(b.retired)
	b.broadcastLocked()
	b.mu.Unlock()
	s.cfg.Log.Warn().Err(why).Str("tag", b.name).Int64("ids", dropped).
		Msg("segment: the incarnation of the tag this node holds ranges of is gone (deleted, perhaps created again): its ranges are dropped, never returned")
	return s.persist(nil, 0)
}

// load takes one range from the store (above every ID held or issued, so
// the node's IDs keep increasing), adjusts the step, and writes the state
// file so a crash can resume it. A resumed buffer first confirms its
// incarnation (verify).
func (b *tagBuf) load() error {
	b.mu.Lock()
	verified := b.verifiedLocked()
	b.mu.Unlock()
	if !verified {
		if err := b.verify(); err != nil {
			return err
		}
		b.mu.Lock()
		need := !b.retiredLocked() && b.needLoadLocked()
		b.mu.Unlock()
		if !need {
			return nil
		}
	}
	b.mu.Lock()
	now := b.svc.cfg.Now()
	step := b.step
	if !b.lastLoad.IsZero() && b.base > 0 {
		step = NextStep(step, b.base, b.top, now.Sub(b.lastLoad), b.svc.cfg.LongRange)
	}
	step = max(step, b.base, int64(b.want))
	inc := b.inc
	above := max(b.last+1, b.floor)
	if n := len(b.ranges); n > 0 {
		above = b.ranges[n-1].Hi
	}
	period := b.startPeriodLocked()
	b.mu.Unlock()
	ctx, cancel := clock.WithTimeout(b.svc.ctx, b.svc.cfg.LoadTimeout)
	defer cancel()
	began := time.Now()
	var r Range
	var t Tag
	var err error
	if period != "" {
		ps, ok := b.svc.cfg.Store.(PeriodStore)
		if !ok {
			return fmt.Errorf("tag %q resets by period and this store cannot start periods", b.name)
		}
		r, t, err = ps.AllocPeriod(ctx, b.name, inc, step, period)
	} else {
		r, t, err = b.svc.cfg.Store.Alloc(ctx, b.name, inc, step, above)
	}
	took := time.Since(began)
	if errors.Is(err, ErrTagGone) || errors.Is(err, ErrUnknownTag) {
		return b.retire(err)
	}
	if errors.Is(err, ErrPeriodPassed) {
		b.mu.Lock()
		b.passed = max(b.passed, period)
		b.broadcastLocked()
		b.mu.Unlock()
		return fmt.Errorf("start period %s of %q: %w", period, b.name, err)
	}
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
	b.lastLoad, b.lastLoadTook, b.failed = now, took, [2]error{}
	b.loads++
	held := append([]Range(nil), b.ranges...)
	issued := b.issued
	b.broadcastLocked()
	b.mu.Unlock()
	b.svc.cfg.Log.Debug().Str("tag", b.name).Stringer("range", r).Int64("above", above).Int64("issued", issued).
		Dur("took_ms", took).Msg("segment: range loaded")
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

// periodUnsavedLocked reports whether the period served is not yet in the
// state file: nothing of it is issued before it is, so that a restart
// never serves an earlier period (R9).
func (b *tagBuf) periodUnsavedLocked() bool {
	return b.period != b.periodSaved && b.svc.cfg.StateFile != ""
}

// startPeriodLocked is the period the loader is to start ("" when none).
func (b *tagBuf) startPeriodLocked() string {
	if _, ok := b.periods[b.wantPeriod]; ok || b.wantPeriod == "" || b.wantPeriod <= b.passed || b.rule == nil {
		return ""
	}
	return b.wantPeriod
}

// setTagLocked takes the tag's base and max step, and its first counter
// value, from its record.
func (b *tagBuf) setTagLocked(t Tag) {
	if t.Reset != nil && b.rule == nil {
		b.reset = true
		b.rule, b.ruleErr = t.Reset.Compile()
	}
	if t.Reset != nil {
		b.periods, b.restartThrough, b.restartBase, b.restartFloor = t.Periods, t.RestartThrough, t.RestartBase, t.RestartFloor
		if base, ok := t.Periods[b.period]; b.period != "" && (!ok || base != b.pbase) {
			b.stale = true
		}
	}
	b.start = t.Start
	b.token = b.token || t.RequireToken // never dropped once known
	b.maxCount = t.MaxCount
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
