package snowflake

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// Sentinel errors of the generator.
var (
	// ErrClockRollback is wrapped by a *RollbackError when the clock is
	// behind the last issued tick by more than the rollback tolerance.
	ErrClockRollback = errors.New("clock moved backwards")
	// ErrFenceReached means the next ID's tick is beyond the time fence.
	ErrFenceReached = errors.New("time fence reached")
	// ErrTimeOverflow means the clock is past the last tick the layout can hold.
	ErrTimeOverflow = errors.New("timestamp field overflow")
	// ErrBeforeEpoch means the clock reads earlier than the layout's epoch.
	ErrBeforeEpoch = errors.New("clock is before the epoch")
	// ErrClockStalled means the generator waited for the next tick longer
	// than it can ever need to: the clock is not moving.
	ErrClockStalled = errors.New("clock is not advancing")
	// ErrInvalidCount is returned for a batch size below 1.
	ErrInvalidCount = errors.New("invalid count")
	// ErrBorrowExhausted means a generator that borrows through a rollback
	// (Config.Borrow) reached its fence: it issues nothing more until the
	// clock catches up with the last issued tick or the fence moves on.
	ErrBorrowExhausted = errors.New("rollback borrow reached the time fence")
)

// DefaultRollbackTolerance is how far back the clock may go before the
// generator refuses instead of waiting: the tolerance of a Config whose
// RollbackTolerance is 0, and snowflaked's default --rollback-tolerance.
const DefaultRollbackTolerance = 5 * time.Millisecond

// Clock is what a Generator reads time from. A nil Clock in a Config is the
// system clock.
type Clock interface {
	// WallNanos returns the wall-clock time in Unix nanoseconds. It may
	// jump backwards or forwards.
	WallNanos() int64
	// Mono returns the time elapsed since a fixed, arbitrary origin on a
	// clock that never steps.
	Mono() time.Duration
}

// RollbackError says how far behind the last issued tick the clock is.
type RollbackError struct {
	Behind    time.Duration // how far the clock reads before the last issued tick's start
	Tolerance time.Duration // the tolerance it exceeded
	// At is the clock reading that was behind: At+Behind is the start of
	// the last issued tick, the time the clock must reach again.
	At time.Time
}

// Error describes the rollback.
func (e *RollbackError) Error() string {
	return fmt.Sprintf("clock moved backwards: %s behind the last issued ID (tolerance %s)", e.Behind, e.Tolerance)
}

// Unwrap makes errors.Is(err, ErrClockRollback) true.
func (e *RollbackError) Unwrap() error { return ErrClockRollback }

// Config configures a Generator.
type Config struct {
	Layout   Layout
	WorkerID int64
	// Clock is read for every ID; nil is the system clock.
	Clock Clock
	// Sleep is how the generator sleeps while it waits for the clock to
	// pass a tick; nil is time.Sleep. A simulation passes one that orders
	// the wait with its other timers.
	Sleep func(time.Duration)
	// RollbackTolerance: a clock this far (or less) behind the last issued
	// tick is waited out; further is an error. 0 means
	// DefaultRollbackTolerance; negative is an error.
	RollbackTolerance time.Duration
	// NoRollbackTolerance waits out no rollback at all (a tolerance of
	// exactly 0): a clock behind the last issued tick is an error at once.
	// RollbackTolerance must then be 0.
	NoRollbackTolerance bool
	// After, when non-zero, is a time at or before which an earlier
	// process may have issued IDs (its fence): every ID has a later tick.
	After UnixMilli
	// Borrow keeps issuing through a rollback beyond the tolerance instead
	// of returning a *RollbackError: the IDs go on from the last issued
	// tick (the rest of its sequence, then the next tick, and so on), never
	// past the fence. At the fence the error is ErrBorrowExhausted.
	Borrow bool
}

// Stats are the generator's slow-path counters.
type Stats struct {
	SequenceWaits int64         // times a tick's sequence ran out and the generator waited for the next tick
	RollbackWaits int64         // times the clock was behind, within tolerance, and the generator waited
	Rollbacks     int64         // rollbacks beyond tolerance (errors returned)
	FenceHits     int64         // IDs refused at the fence
	Waited        time.Duration // total time spent waiting on the clock
	// Borrowed counts the IDs reserved while the clock was behind the last
	// issued tick beyond the tolerance (Config.Borrow). A batch refused
	// halfway counts the part it reserved, which nobody issues.
	Borrowed int64
	// BorrowExhausted counts the requests refused because borrowing
	// reached the fence.
	BorrowExhausted int64
}

// Generator issues strictly increasing IDs for one worker. It is safe for
// concurrent use and does not allocate per ID: all state is one atomic word
// holding the last issued tick and sequence.
type Generator struct {
	// Read-only after NewGenerator.
	layout     Layout
	worker     int64
	workerBits int64 // worker << seqBits, ready to OR in
	clock      Clock
	sleep      func(time.Duration) // Config.Sleep
	tolerance  int64               // nanoseconds
	borrow     bool
	seqBits    uint // the per-tick counter's bits: SequenceBits - GeneBits
	geneBits   uint
	geneMask   uint64
	tickShift  uint // WorkerBits + SequenceBits
	seqMask    uint64
	epochNs    int64
	unitNs     int64
	maxTick    int64

	// state is written by every ID: alone on its cache line, so its
	// traffic between cores does not evict the fields read beside it.
	_     [64]byte
	state atomic.Uint64 // lastTick<<seqBits | lastSeq
	_     [56]byte

	fence atomic.Int64 // highest tick an ID may carry

	// spread fills the gene bits of IDs asked for without a gene: the
	// next value of this counter, so that IDs spread evenly modulo every
	// m dividing 2^GeneBits at any request rate.
	spread atomic.Uint64

	seqWaits, rbWaits, rollbacks, fenceHits, waitedNs atomic.Int64
	borrowed, borrowHits                              atomic.Int64
}

// NewGenerator checks the configuration and returns a generator with no
// fence (call SetFence before serving when restarts must be safe).
func NewGenerator(cfg Config) (*Generator, error) {
	l := cfg.Layout
	if err := l.validateShape(); err != nil {
		return nil, err
	}
	if cfg.WorkerID < 0 || cfg.WorkerID > l.MaxWorkerID() {
		return nil, fmt.Errorf("new generator: worker ID %d is outside 0..%d of layout %s", cfg.WorkerID, l.MaxWorkerID(), l)
	}
	tol, err := cfg.tolerance()
	if err != nil {
		return nil, err
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.NewSystem()
	}
	if cfg.Sleep == nil {
		cfg.Sleep = time.Sleep
	}
	g := &Generator{
		layout: l, worker: cfg.WorkerID, workerBits: cfg.WorkerID << l.SequenceBits,
		clock: clk, sleep: cfg.Sleep, tolerance: int64(tol), borrow: cfg.Borrow,
		seqBits: l.SequenceBits - l.GeneBits, geneBits: l.GeneBits, geneMask: uint64(l.MaxGene()),
		tickShift: l.WorkerBits + l.SequenceBits, seqMask: uint64(l.PerTick() - 1),
		epochNs: l.Epoch.UnixNano(), unitNs: int64(l.Unit), maxTick: l.MaxTick(),
	}
	g.fence.Store(math.MaxInt64)
	var after int64
	if cfg.After != 0 {
		after = l.tickOfMilli(int64(cfg.After))
		if after < 0 {
			after = 0
		}
		if after > g.maxTick {
			return nil, fmt.Errorf("new generator: %w: fence %d is past the layout's end", ErrTimeOverflow, cfg.After)
		}
	}
	// Mark the sequence of the "after" tick as used up, so the first ID
	// takes a later tick.
	g.state.Store(uint64(after)<<g.seqBits | g.seqMask)
	return g, nil
}

// tolerance returns the rollback tolerance cfg asks for.
func (cfg Config) tolerance() (time.Duration, error) {
	switch {
	case cfg.RollbackTolerance < 0:
		return 0, fmt.Errorf("new generator: rollback tolerance %s is negative", cfg.RollbackTolerance)
	case cfg.NoRollbackTolerance && cfg.RollbackTolerance != 0:
		return 0, fmt.Errorf("new generator: rollback tolerance %s with NoRollbackTolerance", cfg.RollbackTolerance)
	case cfg.NoRollbackTolerance:
		return 0, nil
	case cfg.RollbackTolerance == 0:
		return DefaultRollbackTolerance, nil
	}
	return cfg.RollbackTolerance, nil
}

// Layout returns the generator's layout.
func (g *Generator) Layout() Layout { return g.layout }

// WorkerID returns the generator's worker ID.
func (g *Generator) WorkerID() int64 { return g.worker }

// Next returns the next ID. With gene bits, they count round from one ID
// to the next (see NextGene for an ID with a given gene).
func (g *Generator) Next() (int64, error) {
	tick, seq, ok := g.reserveOne()
	if !ok {
		var err error
		if tick, seq, _, err = g.reserve(1); err != nil {
			return 0, err
		}
	}
	id := tick<<g.tickShift | g.workerBits | int64(seq)<<g.geneBits
	if g.geneBits > 0 {
		id |= int64((g.spread.Add(1) - 1) & g.geneMask)
	}
	return id, nil
}

// NextGene returns the next ID whose gene bits are gene's low bits: the ID
// modulo 2^GeneBits equals gene modulo 2^GeneBits. Without gene bits it is
// Next.
func (g *Generator) NextGene(gene uint64) (int64, error) {
	if g.geneBits == 0 {
		return g.Next()
	}
	tick, seq, _, err := g.reserve(1)
	if err != nil {
		return 0, err
	}
	return tick<<g.tickShift | g.workerBits | int64(seq)<<g.geneBits | int64(gene&g.geneMask), nil
}

// NextN returns n new IDs in increasing order.
func (g *Generator) NextN(n int) ([]int64, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %d, want at least 1", ErrInvalidCount, n)
	}
	return g.AppendN(make([]int64, 0, n), n)
}

// AppendN appends n new IDs, in increasing order, to dst. A batch larger
// than one tick's sequence spans several ticks. On error dst is returned
// unchanged (IDs reserved before the error are never issued by anyone).
func (g *Generator) AppendN(dst []int64, n int) ([]int64, error) {
	if n < 1 {
		return dst, fmt.Errorf("%w: %d, want at least 1", ErrInvalidCount, n)
	}
	if g.geneBits > 0 {
		first := g.spread.Add(uint64(n)) - uint64(n)
		return g.appendN(dst, n, func(i uint64) uint64 { return (first + i) & g.geneMask })
	}
	return g.appendN(dst, n, nil)
}

// AppendNGene is AppendN for IDs that all carry gene (see NextGene).
func (g *Generator) AppendNGene(dst []int64, n int, gene uint64) ([]int64, error) {
	if n < 1 {
		return dst, fmt.Errorf("%w: %d, want at least 1", ErrInvalidCount, n)
	}
	gene &= g.geneMask
	return g.appendN(dst, n, func(uint64) uint64 { return gene })
}

// appendN appends n IDs; gene, when set, gives the gene bits of the i-th.
func (g *Generator) appendN(dst []int64, n int, gene func(i uint64) uint64) ([]int64, error) {
	orig := len(dst)
	var i uint64
	for n > 0 {
		tick, seq, count, err := g.reserve(uint64(n))
		if err != nil {
			return dst[:orig], err
		}
		base := tick<<g.tickShift | g.workerBits
		for j := uint64(0); j < count; j++ {
			id := base | int64(seq+j)<<g.geneBits
			if gene != nil {
				id |= int64(gene(i))
			}
			dst = append(dst, id)
			i++
		}
		n -= int(count)
	}
	return dst, nil
}

// reserve takes up to want consecutive sequence numbers in one tick and
// returns the tick, the first sequence number and how many it took.
//
// The clock is read before the state is loaded, so that the window between
// the load and the compare-and-swap is a few nanoseconds, not a clock read:
// under contention a lost race costs a retry with the same reading, not
// another clock read (with the clock read inside the window, about one ID
// in five needed a second read at 2 goroutines). A reading older than the
// state can only make the clock look behind it or stuck in its tick; before
// refusing or waiting on that ground, the clock is read again, after the
// load, so those decisions always rest on a reading newer than the state.
//
// Borrowing (Config.Borrow): a clock behind the last issued tick beyond the
// tolerance takes the next number after the state word — the rest of the
// last tick's sequence, then the tick after it — exactly as if the clock
// read the last tick. Time in the IDs stands still or moves on only as
// sequences fill, and the fence check below bounds it like any other tick.
func (g *Generator) reserve(want uint64) (tick int64, first, count uint64, err error) {
	var waitStart time.Duration
	waiting := false
	nowNs := g.clock.WallNanos()
	for {
		old := g.state.Load()
		last := int64(old >> g.seqBits)
		seq := old & g.seqMask
		now := g.tickOf(nowNs)
		if now < last || now == last && seq == g.seqMask { // about to refuse or wait: on a fresh reading
			nowNs = g.clock.WallNanos()
			now = g.tickOf(nowNs)
		}
		borrowing := false
		if now > last {
			tick, first = now, 0
		} else {
			if now < last {
				if behind := g.layout.TickStart(last) - nowNs; behind > g.tolerance {
					if nowNs < g.epochNs {
						g.rollbacks.Add(1)
						return 0, 0, 0, fmt.Errorf("%w: clock reads %s, epoch is %s", ErrBeforeEpoch, time.Unix(0, nowNs).UTC(), g.layout.Epoch)
					}
					if !g.borrow {
						g.rollbacks.Add(1)
						return 0, 0, 0, &RollbackError{Behind: time.Duration(behind), Tolerance: time.Duration(g.tolerance), At: time.Unix(0, nowNs)}
					}
					borrowing = true
				}
			}
			switch {
			case seq < g.seqMask:
				tick, first = last, seq+1
			case borrowing: // the last tick is used up: borrow the next
				tick, first = last+1, 0
			default: // this tick is used up: wait for the next
				if !waiting {
					waiting, waitStart = true, g.clock.Mono()
					if now < last {
						g.rbWaits.Add(1)
					} else {
						g.seqWaits.Add(1)
					}
				}
				if err := g.wait(last, nowNs, waitStart); err != nil {
					return 0, 0, 0, err
				}
				continue // the next round reads the clock again: nowNs is at most in tick last
			}
		}
		if fence := g.fence.Load(); tick > fence || borrowing && tick > g.maxTick {
			if borrowing { // the fence, or the layout's end: either way, until the clock catches up
				g.borrowHits.Add(1)
				return 0, 0, 0, fmt.Errorf("%w: the IDs are %s ahead of the clock", ErrBorrowExhausted,
					time.Duration(g.layout.TickStart(last)-nowNs).Round(time.Millisecond))
			}
			g.fenceHits.Add(1)
			return 0, 0, 0, ErrFenceReached
		}
		if tick > g.maxTick {
			return 0, 0, 0, fmt.Errorf("%w: tick %d is past %d (layout %s ended %s)", ErrTimeOverflow, tick, g.maxTick, g.layout, g.layout.End().Format(time.RFC3339))
		}
		count = min(want, g.seqMask-first+1)
		if g.state.CompareAndSwap(old, uint64(tick)<<g.seqBits|(first+count-1)) {
			if waiting {
				g.waitedNs.Add(int64(g.clock.Mono() - waitStart))
			}
			if borrowing {
				g.borrowed.Add(int64(count))
			}
			return tick, first, count, nil
		}
		// Lost a race: retry with the same reading (see above).
	}
}

// reserveOne is reserve(1) when nothing stands in the way: the clock is in
// a later tick than the last issued one, or in the same tick with sequence
// numbers left, below the fence and the layout's end. It does no waiting,
// borrowing or refusing: ok false sends the caller to reserve, which reads
// the clock again. A lost race retries with the same reading, as reserve.
func (g *Generator) reserveOne() (tick int64, seq uint64, ok bool) {
	now := g.tickOf(g.clock.WallNanos())
	for {
		old := g.state.Load()
		last := int64(old >> g.seqBits)
		switch seq = old & g.seqMask; {
		case now > last:
			tick, seq = now, 0
		case now == last && seq < g.seqMask:
			tick, seq = last, seq+1
		default:
			return 0, 0, false
		}
		if tick > g.fence.Load() || tick > g.maxTick {
			return 0, 0, false
		}
		if g.state.CompareAndSwap(old, uint64(tick)<<g.seqBits|seq) {
			return tick, seq, true
		}
	}
}

// tickOf is Layout.TickOf with the epoch and unit at hand. The common 1 ms
// unit takes an inlined division by a constant, a multiply (a variable
// divisor is a 64-bit division, several times slower); other units and
// times before the epoch go to tickOfAny.
func (g *Generator) tickOf(ns int64) int64 {
	if g.unitNs == int64(time.Millisecond) && ns >= g.epochNs { // ns-epochNs cannot wrap: epochNs >= 0
		return (ns - g.epochNs) / int64(time.Millisecond)
	}
	return g.tickOfAny(ns)
}

// tickOfAny is tickOf for any unit and any time.
//
//go:noinline
func (g *Generator) tickOfAny(ns int64) int64 {
	if d := ns - g.epochNs; d >= 0 && d <= ns { // after the epoch, no wrap (epochNs >= 0)
		return d / g.unitNs
	}
	return floorTick(ns, g.epochNs, g.unitNs)
}

// wait pauses until the clock may have passed tick last. Long waits sleep,
// short ones yield, so a full tick costs little more than its length.
func (g *Generator) wait(last, nowNs int64, since time.Duration) error {
	// The tolerance plus two ticks is the longest a healthy clock makes us wait.
	if g.clock.Mono()-since > time.Duration(g.tolerance+2*g.unitNs)+time.Second {
		return fmt.Errorf("%w: waited %s for tick %d", ErrClockStalled, g.clock.Mono()-since, last+1)
	}
	if rest := g.layout.TickStart(last+1) - nowNs; rest > int64(2*time.Millisecond) {
		g.sleep(time.Duration(rest) - time.Millisecond)
		return nil
	}
	runtime.Gosched()
	return nil
}

// RaiseFloor makes every later ID carry a tick after the one containing
// floor, as Config.After does at construction: for
// a fence learnt while serving, e.g. the fence of a worker ID's previous
// holder. It never lowers the floor and is safe to call concurrently with
// ID requests (one CAS on the state word: a request that reserved before it
// returns has a tick at or below the floor only if it completed first, and
// the caller must not have let the generator issue in that range). A time
// past the layout's end is ErrTimeOverflow and changes nothing.
func (g *Generator) RaiseFloor(floor UnixMilli) error {
	after := max(g.layout.tickOfMilli(int64(floor)), 0)
	if after > g.maxTick {
		return fmt.Errorf("raise floor: %w: %d is past the layout's end", ErrTimeOverflow, floor)
	}
	want := uint64(after)<<g.seqBits | g.seqMask
	for {
		old := g.state.Load()
		if old >= want {
			return nil
		}
		if g.state.CompareAndSwap(old, want) {
			return nil
		}
	}
}

// SetFence sets the time beyond which no ID may be issued: the tick of
// every later ID is at most the tick containing it. NoFence (what Fence
// reports when there is none) means no fence; a time before the epoch stops
// every ID.
func (g *Generator) SetFence(fence UnixMilli) {
	g.fence.Store(g.layout.tickOfMilli(int64(fence)))
}

// Fence returns the fence as the start of its tick (NoFence when there is
// none).
func (g *Generator) Fence() UnixMilli {
	f := g.fence.Load()
	ms, ok := g.layout.tickStartMilli(f)
	switch {
	case ok:
		return UnixMilli(ms)
	case f > 0:
		return NoFence
	}
	return math.MinInt64
}

// LastIssued returns the start of the last issued tick (or of the tick the
// generator was told to start after). Persisting it as a fence makes a
// restart safe.
func (g *Generator) LastIssued() UnixMilli {
	ms, _ := g.layout.tickStartMilli(int64(g.state.Load() >> g.seqBits)) // fits: the tick came from a Unix time
	return UnixMilli(ms)
}

// Behind returns how far the clock now reads before the start of the last
// issued tick, or 0 when it does not.
func (g *Generator) Behind() time.Duration {
	d := g.layout.TickStart(int64(g.state.Load()>>g.seqBits)) - g.clock.WallNanos()
	if d <= 0 {
		return 0
	}
	return time.Duration(d)
}

// Stats returns the slow-path counters.
func (g *Generator) Stats() Stats {
	return Stats{
		SequenceWaits: g.seqWaits.Load(), RollbackWaits: g.rbWaits.Load(),
		Rollbacks: g.rollbacks.Load(), FenceHits: g.fenceHits.Load(),
		Waited:   time.Duration(g.waitedNs.Load()),
		Borrowed: g.borrowed.Load(), BorrowExhausted: g.borrowHits.Load(),
	}
}
