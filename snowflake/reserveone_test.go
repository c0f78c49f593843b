package snowflake

import (
	"math/rand/v2"
	"testing"
	"time"
)

// fixedClock reads ns on both clocks.
type fixedClock struct{ ns int64 }

func (c *fixedClock) WallNanos() int64    { return c.ns }
func (c *fixedClock) Mono() time.Duration { return time.Duration(c.ns) }

// TestReserveOneMatchesReserve: Next's fast path, when it answers, answers
// exactly what reserve(1) would from the same state, fence and clock (units,
// layouts, borrowing, tolerance, the layout's end, a clock before the epoch,
// far behind or ahead); when it declines, it changed nothing. Seeded, so a
// failure replays.
func TestReserveOneMatchesReserve(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	units := []time.Duration{time.Millisecond, 10 * time.Millisecond, time.Second}
	var oks, declines int
	defer func() { t.Logf("ok %d declined %d", oks, declines) }()
	for i := 0; i < 100000; i++ {
		unit := units[rng.IntN(len(units))]
		tb := uint(20 + rng.IntN(22))
		sb := uint(1 + rng.IntN(4))
		l := Layout{TimeBits: tb, WorkerBits: 3, SequenceBits: sb, Epoch: DefaultEpoch, Unit: unit}
		if rng.IntN(4) == 0 {
			l.Epoch = time.Unix(0, 0)
		}
		clk := &fixedClock{}
		cfg := Config{Layout: l, WorkerID: 1, Clock: clk, Sleep: func(time.Duration) {}, Borrow: rng.IntN(2) == 0}
		if rng.IntN(3) == 0 {
			cfg.NoRollbackTolerance = true
		}
		a, err := NewGenerator(cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewGenerator(cfg)
		maxTick := l.MaxTick()
		last := rng.Int64N(maxTick + 1)
		if rng.IntN(10) == 0 {
			last = maxTick
		}
		seqMask := uint64(l.PerTick() - 1)
		seq := uint64(rng.Int64N(int64(seqMask) + 1))
		if rng.IntN(3) == 0 {
			seq = seqMask
		}
		state := uint64(last)<<a.seqBits | seq
		a.state.Store(state)
		b.state.Store(state)
		fence := last + int64(rng.IntN(5)) - 2
		if rng.IntN(5) == 0 {
			fence = 1 << 62
		}
		a.fence.Store(fence)
		b.fence.Store(fence)
		// clock: around the last tick (within a few units), or far away.
		base := l.TickStart(last)
		off := int64(rng.IntN(9)-4)*int64(unit) + rng.Int64N(int64(unit))
		if rng.IntN(10) == 0 {
			off = -int64(rng.IntN(100)) * int64(time.Second)
		}
		clk.ns = base + off
		if rng.IntN(50) == 0 {
			clk.ns = l.Epoch.UnixNano() - rng.Int64N(int64(time.Hour))
		}
		tick, s, ok := a.reserveOne()
		if !ok {
			if a.state.Load() != state {
				t.Fatalf("reserveOne declined but changed the state")
			}
			declines++
			continue
		}
		oks++
		tick2, first, count, err := b.reserve(1)
		if err != nil || tick2 != tick || first != s || count != 1 || a.state.Load() != b.state.Load() {
			t.Fatalf("case %d unit %v layout %s state last=%d seq=%d fence=%d clock off=%d: reserveOne=(%d,%d) reserve=(%d,%d,%d,%v)",
				i, unit, l, last, seq, fence, off, tick, s, tick2, first, count, err)
		}
	}
}
