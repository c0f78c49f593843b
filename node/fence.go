package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"snowflaked/clock"
	"snowflaked/clockguard"
)

// FenceSetter receives the persisted fence and says where the generator
// stands; *fencing.Gate satisfies it.
type FenceSetter interface {
	SetFence(unixMilli int64)
	// LastIssued is the start of the last issued tick, or of the tick the
	// generator was told to start after (Unix ms).
	LastIssued() int64
}

// FenceKeeper keeps the time fence (SPEC §3) ahead of the clock: every
// fence-ahead/3 it moves the fence to now + fence-ahead, writes it durably
// first and only then lets the generator issue up to it. It never lowers the
// fence, so a clock that goes back cannot make it promise less than before.
// A failed write fails the fence_persist_failed check (the node leaves
// service, and the generator's fence stays where the last good write put it);
// the next good write passes it again. It is used in both modes: in
// ZooKeeper mode the same local fence is what the node's reports cover.
type FenceKeeper struct {
	ahead   time.Duration
	clock   clock.Clock
	persist func(fenceUnixMilli int64) error
	gen     FenceSetter
	check   *clockguard.Check
	log     zerolog.Logger
	wake    chan struct{}

	mu        sync.Mutex
	persisted int64 // last fence written durably, Unix ms
	failed    bool
}

// NewFenceKeeper returns a keeper whose fence starts at initial (Unix ms; the
// fence read from disk at start, 0 for none) and registers the
// fence_persist_failed check, pending until the first successful Extend.
// persist must write the fence durably before it returns.
func NewFenceKeeper(g *clockguard.Guard, c clock.Clock, gen FenceSetter, ahead time.Duration,
	initial int64, persist func(fenceUnixMilli int64) error, log zerolog.Logger) *FenceKeeper {
	return &FenceKeeper{
		ahead: ahead, clock: c, persist: persist, gen: gen, log: log,
		check:     g.Check(clockguard.ReasonFencePersist),
		wake:      make(chan struct{}, 1),
		persisted: initial,
	}
}

// Persisted returns the fence last written durably (Unix ms).
func (k *FenceKeeper) Persisted() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.persisted
}

// Interval is how often Run extends the fence: fence-ahead/3, so the fence
// is never reached in normal running even if one write is slow.
func (k *FenceKeeper) Interval() time.Duration { return k.ahead / 3 }

// Extend moves the fence to max(persisted fence, now + fence-ahead, last
// issued tick), writes it and then hands it to the generator. On a write
// error the generator keeps the previous fence and the check fails.
func (k *FenceKeeper) Extend() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	// Never below the generator's floor: a floor raised while serving (a
	// re-claim after another holder's fence) must reach the disk with the
	// token it belongs to, or a restart from this file would start too early.
	fence := max(k.persisted, clock.UnixMilli(k.clock)+k.ahead.Milliseconds(), k.gen.LastIssued())
	if err := k.persist(fence); err != nil {
		err = fmt.Errorf("persist fence %d: %w", fence, err)
		if !k.failed {
			k.log.Error().Err(err).Int64("fence_ms", k.persisted).Msg("fence not persisted; IDs stop at the previous fence")
		}
		k.failed = true
		k.check.Fail(err.Error())
		return err
	}
	if k.failed {
		k.log.Info().Int64("fence_ms", fence).Msg("fence persisted again")
	}
	k.failed = false
	k.persisted = fence
	k.gen.SetFence(fence)
	k.check.Pass()
	return nil
}

// Wake asks Run to extend the fence now (e.g. after the generator hit it).
// It never blocks.
func (k *FenceKeeper) Wake() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Run extends the fence every Interval (and on Wake) until ctx ends.
func (k *FenceKeeper) Run(ctx context.Context) {
	t := time.NewTicker(k.Interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-k.wake:
		}
		_ = k.Extend() // logged and reported through the check
	}
}

// PersistFinal writes fence as is, even below the persisted fence: for a
// graceful stop, once no ID can be issued any more, with the exact last
// issued time, so a clean restart waits for nothing. Call it only after Run
// has returned and the generator is stopped.
func (k *FenceKeeper) PersistFinal(fence int64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.persist(fence); err != nil {
		return fmt.Errorf("persist final fence %d: %w", fence, err)
	}
	k.persisted = fence
	return nil
}
