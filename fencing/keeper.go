package fencing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// FenceSetter receives the persisted fence and says where the generator
// stands; *fencing.Gate satisfies it.
type FenceSetter interface {
	SetFence(fence snowflake.UnixMilli)
	// LastIssued is the start of the last issued tick, or of the tick the
	// generator was told to start after.
	LastIssued() snowflake.UnixMilli
}

// Keeper keeps the time fence ahead of the clock: every
// fence-ahead/3 it moves the fence to now + fence-ahead, writes it durably
// first and only then lets the generator issue up to it. It never lowers the
// fence, so a clock that goes back cannot make it promise less than before.
// A failed write fails the fence_persist_failed check (the node leaves
// service, and the generator's fence stays where the last good write put it);
// the next good write passes it again.
//
// A write that hangs (an fsync that never returns) must not make a black
// hole: each write has a deadline (a third of the fence-ahead, at most
// maxWriteTimeout) after which it counts as
// failed; no lock anything else needs is held during the I/O (Persisted is
// an atomic read); and at most one write is in flight, so a late write can
// never land on disk after a newer one and lower the fence there. A write
// that completes after its deadline still takes effect then (it is
// durable).
type Keeper struct {
	ahead   time.Duration
	timeout time.Duration // deadline of one write
	clock   clock.Clock
	persist func(fence snowflake.UnixMilli) (written snowflake.UnixMilli, err error)
	gen     FenceSetter
	check   *health.Check
	log     zerolog.Logger
	wake    chan struct{}

	persisted atomicMilli // last fence written durably
	hold      func() bool // while it returns true, Extend writes nothing (set before Run)

	mu       sync.Mutex // state below; never held during a write
	inFlight bool
	idle     chan struct{} // closed when the write in flight returns
	failed   bool
}

// maxWriteTimeout bounds the deadline of one fence write: an fsync that
// takes longer counts as failed (the node leaves service), whatever
// --fence-ahead is.
const maxWriteTimeout = 2 * time.Second

// errHeld means Extend wrote nothing because the clock is suspect (an
// unconfirmed forward jump): a fence on it must not be persisted.
var errHeld = errors.New("fence held: the clock jumped forward and is not confirmed")

// SetHold makes Extend write nothing while hold returns true. Call it
// before Run.
func (k *Keeper) SetHold(hold func() bool) { k.hold = hold }

// errWriteInFlight means the previous fence write has not returned yet
// (the disk may hang): no other write starts until it does.
var errWriteInFlight = errors.New("previous fence write still running")

// NewKeeper returns a keeper whose fence starts at initial (the fence read from disk at start, 0 for none) and registers the
// fence_persist_failed check, pending until the first successful Extend.
// persist must write the fence durably before it returns, and return the
// fence it wrote (never below the one asked for). A write has
// fence-ahead/3 to finish (by then the next one is due), at least 10ms and
// at most maxWriteTimeout.
func NewKeeper(g *health.Guard, c clock.Clock, gen FenceSetter, ahead time.Duration,
	initial snowflake.UnixMilli, persist func(fence snowflake.UnixMilli) (snowflake.UnixMilli, error), log zerolog.Logger) *Keeper {
	k := &Keeper{
		ahead: ahead, timeout: min(max(ahead/3, 10*time.Millisecond), maxWriteTimeout), clock: c, persist: persist, gen: gen, log: log,
		check: g.Check(health.ReasonFencePersist),
		wake:  make(chan struct{}, 1),
	}
	k.persisted.Store(initial)
	return k
}

// Persisted returns the fence last written durably. It never waits for a
// write.
func (k *Keeper) Persisted() snowflake.UnixMilli { return k.persisted.Load() }

// interval is how often Run extends the fence: fence-ahead/3, so the fence
// is never reached in normal running even if one write is slow.
func (k *Keeper) interval() time.Duration { return k.ahead / 3 }

// Extend moves the fence to max(persisted fence, now + fence-ahead, last
// issued tick), writes it (within WriteTimeout) and then hands it to the
// generator. On a write error or timeout the generator keeps the previous
// fence and the check fails. It stops waiting for the write once ctx ends.
func (k *Keeper) Extend(ctx context.Context) error {
	if k.hold != nil && k.hold() {
		return errHeld // the jump guard reports it (clock_jump), not fence_persist_failed
	}
	// Never below the generator's floor: a floor raised while serving (a
	// re-claim after another holder's fence) must reach the disk with the
	// token it belongs to, or a restart from this file would start too early.
	fence := max(k.persisted.Load(), snowflake.UnixMilliNow(k.clock).Add(k.ahead), k.gen.LastIssued())
	return k.write(ctx, fence, false, k.timeout)
}

// write persists fence in its own goroutine and waits up to timeout. On
// success the fence is recorded (raised, or set as is when final) and, unless
// final, handed to the generator. At most one write is in flight.
func (k *Keeper) write(ctx context.Context, fence snowflake.UnixMilli, final bool, timeout time.Duration) error {
	// One deadline for the whole call, that stays passed once passed: the
	// wait for a write in flight and the wait for this one share it, in
	// every interleaving.
	dctx, cancel := clock.WithTimeout(ctx, timeout)
	defer cancel()
	k.mu.Lock()
	if k.inFlight && final {
		// A stop cancels Run while its write may still be on the disk:
		// the final write waits for it (within its own deadline) rather
		// than fail and leave the fence ahead.
		idle := k.idle
		k.mu.Unlock()
		select {
		case <-idle:
		case <-dctx.Done():
		}
		k.mu.Lock()
	}
	if k.inFlight {
		k.mu.Unlock()
		err := fmt.Errorf("persist fence %d: %w (more than %v)", fence, errWriteInFlight, k.timeout)
		k.fail(err)
		return err
	}
	if dctx.Err() != nil && final {
		// The deadline passed while the earlier write finished: starting
		// the final write now could hang the stop past its deadline.
		k.mu.Unlock()
		err := fmt.Errorf("persist fence %d: no time left for the final write (%v)", fence, timeout)
		k.fail(err)
		return err
	}
	k.inFlight = true
	idle := make(chan struct{})
	k.idle = idle
	k.mu.Unlock()

	done := make(chan error, 1)
	go func() {
		if mutation.Broken(mutation.L1FenceBeforePersist) && !final {
			k.gen.SetFence(fence)
		}
		written, err := k.persist(fence)
		if err == nil {
			if final {
				k.persisted.Store(written)
			} else {
				k.persisted.raise(written)
				k.gen.SetFence(written)
			}
		}
		k.mu.Lock()
		k.inFlight = false
		close(idle)
		k.mu.Unlock()
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-dctx.Done():
		select {
		case err = <-done: // the write ended too: its result wins (select picks at random)
		default:
			if ctx.Err() != nil {
				err = fmt.Errorf("stopped waiting: %w", ctx.Err())
			} else {
				err = fmt.Errorf("did not finish within %v (disk hung?)", timeout)
			}
		}
	}
	if err != nil {
		err = fmt.Errorf("persist fence %d: %w", fence, err)
		k.fail(err)
		return err
	}
	k.mu.Lock()
	recovered := k.failed
	k.failed = false
	k.mu.Unlock()
	if recovered {
		k.log.Info().Int64("fence_ms", int64(fence)).Msg("fence persisted again")
	}
	k.check.Pass()
	return nil
}

// fail records a failed write: the check fails, the first failure is logged.
func (k *Keeper) fail(err error) {
	k.mu.Lock()
	first := !k.failed
	k.failed = true
	k.mu.Unlock()
	if first {
		k.log.Error().Err(err).Int64("fence_ms", int64(k.persisted.Load())).Msg("fence not persisted; IDs stop at the previous fence")
	}
	k.check.Fail(err.Error())
}

// atomicMilli is an instant read and written atomically.
type atomicMilli struct{ v atomic.Int64 }

func (a *atomicMilli) Load() snowflake.UnixMilli   { return snowflake.UnixMilli(a.v.Load()) }
func (a *atomicMilli) Store(u snowflake.UnixMilli) { a.v.Store(int64(u)) }

// raise sets a to u if u is larger.
func (a *atomicMilli) raise(u snowflake.UnixMilli) {
	for {
		old := a.v.Load()
		if int64(u) <= old || a.v.CompareAndSwap(old, int64(u)) {
			return
		}
	}
}

// Wake asks Run to extend the fence now (e.g. after the generator hit it).
// It never blocks.
func (k *Keeper) Wake() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Run extends the fence every Interval (and on Wake) until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	clock.Every(ctx, k.interval(), k.wake, func() {
		_ = k.Extend(ctx) // logged and reported through the check
	})
}

// PersistFinal writes fence as is, even below the persisted fence, within
// timeout: for a graceful stop, once no ID can be issued any more, with the
// exact last issued time, so a clean restart waits for nothing. Call it only
// after Run has returned and the generator is stopped. A write still in
// flight (Run stopped waiting for it) is waited for within timeout; one that
// hangs past it makes PersistFinal fail (the fence on disk stays ahead:
// safe). Its timer arms under ctx.
func (k *Keeper) PersistFinal(ctx context.Context, fence snowflake.UnixMilli, timeout time.Duration) error {
	if err := k.write(ctx, fence, true, timeout); err != nil {
		return fmt.Errorf("persist final fence: %w", err)
	}
	return nil
}
