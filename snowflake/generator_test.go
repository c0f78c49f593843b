package snowflake_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// genStart is where fake clocks start: a whole second, so the start of a
// tick for every unit up to 1s.
var genStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// newFake returns a fake clock at genStart.
func newFake(t *testing.T) *clocktest.Fake {
	t.Helper()
	return clocktest.NewFake(genStart)
}

// newGen returns a generator for cfg; a zero cfg.Layout means DefaultLayout.
func newGen(t *testing.T, cfg snowflake.Config) *snowflake.Generator {
	t.Helper()
	if cfg.Layout == (snowflake.Layout{}) {
		cfg.Layout = snowflake.DefaultLayout()
	}
	g, err := snowflake.NewGenerator(cfg)
	if err != nil {
		t.Fatalf("NewGenerator(%+v): %v", cfg, err)
	}
	return g
}

// mustLayout parses a layout with DefaultEpoch.
func mustLayout(t *testing.T, bits string, unit time.Duration) snowflake.Layout {
	t.Helper()
	l, err := snowflake.ParseLayout(bits, defaultEpochText, unit.String(), genStart)
	if err != nil {
		t.Fatalf("ParseLayout(%q, %s): %v", bits, unit, err)
	}
	return l
}

// mustNext returns g.Next() or fails the test.
func mustNext(t *testing.T, g *snowflake.Generator) int64 {
	t.Helper()
	id, err := g.Next()
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return id
}

// mustDecode decodes id with g's layout or fails the test.
func mustDecode(t *testing.T, l snowflake.Layout, id int64) snowflake.Parts {
	t.Helper()
	p, err := l.Decode(id)
	if err != nil {
		t.Fatalf("Decode(%d): %v", id, err)
	}
	return p
}

// tickAt returns the tick of layout l containing the time tm.
func tickAt(l snowflake.Layout, tm time.Time) int64 { return l.TickOf(tm.UnixNano()) }

// checkIncreasing fails the test unless ids is strictly increasing, above
// after, and every ID carries worker.
func checkIncreasing(t *testing.T, l snowflake.Layout, ids []int64, after, worker int64) {
	t.Helper()
	prev := after
	for i, id := range ids {
		if id <= prev {
			t.Fatalf("ID %d (#%d) = %d is not above the previous %d", i, i, id, prev)
		}
		p := mustDecode(t, l, id)
		if p.WorkerID != worker {
			t.Fatalf("ID #%d %d has worker %d, want %d", i, id, p.WorkerID, worker)
		}
		prev = id
	}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testsupport.Poll(t, 10*time.Second, 100*time.Microsecond, what, cond)
}

// autoStep is a fake clock auto step for tests that wait for the next tick
// of l. A wait of more than 2ms sleeps for real, as long as the wall clock
// says is left, so a tick of 10ms needs steps of 1ms, not 1µs.
func autoStep(l snowflake.Layout) time.Duration {
	if l.Unit <= 2*time.Millisecond {
		return time.Microsecond
	}
	return l.Unit / 10
}

// stalledClock is a fake clock whose wall time never moves while every Mono
// call advances monotonic time by step: a wall clock that is stuck, as the
// generator sees it. For a single goroutine only.
type stalledClock struct {
	*clocktest.Fake
	step time.Duration
}

// Mono advances the monotonic clock by step, leaving the wall clock alone.
func (c stalledClock) Mono() time.Duration {
	c.Fake.Advance(c.step)
	c.Fake.StepWall(-c.step)
	return c.Fake.Mono()
}

func TestNewGeneratorErrors(t *testing.T) {
	def := snowflake.DefaultLayout()
	short := snowflake.Layout{TimeBits: 20, WorkerBits: 10, SequenceBits: 12, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond}
	fake := clocktest.NewFake(genStart)
	tests := []struct {
		name    string
		cfg     snowflake.Config
		wantIs  error
		wantErr string
	}{
		{name: "negative tolerance", cfg: snowflake.Config{Layout: def, Clock: fake, RollbackTolerance: -time.Nanosecond}, wantErr: "rollback tolerance -1ns is negative"},
		{name: "tolerance and none", cfg: snowflake.Config{Layout: def, Clock: fake, RollbackTolerance: time.Millisecond, NoRollbackTolerance: true}, wantErr: "rollback tolerance 1ms with NoRollbackTolerance"},
		{name: "worker -1", cfg: snowflake.Config{Layout: def, WorkerID: -1, Clock: fake}, wantErr: "worker ID -1 is outside 0..1023"},
		{name: "worker 1024", cfg: snowflake.Config{Layout: def, WorkerID: 1024, Clock: fake}, wantErr: "worker ID 1024 is outside 0..1023"},
		{name: "js53 worker 32", cfg: snowflake.Config{Layout: snowflake.JS53Layout(), WorkerID: 32, Clock: fake}, wantErr: "outside 0..31"},
		{name: "41/0/22 worker 1", cfg: snowflake.Config{Layout: mustLayout(t, "41/0/22", time.Millisecond), WorkerID: 1, Clock: fake}, wantErr: "outside 0..0"},
		{name: "zero layout", cfg: snowflake.Config{Clock: fake}, wantIs: snowflake.ErrInvalidLayout},
		{name: "64 bits", cfg: snowflake.Config{Layout: snowflake.Layout{TimeBits: 42, WorkerBits: 10, SequenceBits: 12, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond}, Clock: fake}, wantIs: snowflake.ErrInvalidLayout},
		{name: "after past the end", cfg: snowflake.Config{Layout: short, Clock: fake, After: snowflake.UnixMilliOf(genStart)}, wantIs: snowflake.ErrTimeOverflow},
		{name: "after max int64", cfg: snowflake.Config{Layout: def, Clock: fake, After: math.MaxInt64}, wantIs: snowflake.ErrTimeOverflow},
		{name: "after 2^53", cfg: snowflake.Config{Layout: def, Clock: fake, After: 1 << 53}, wantIs: snowflake.ErrTimeOverflow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := snowflake.NewGenerator(tc.cfg)
			if err == nil {
				t.Fatalf("NewGenerator = %v, nil; want an error", g)
			}
			if g != nil {
				t.Errorf("NewGenerator returned a generator with its error")
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v, want one wrapping %v", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewGeneratorInitialState(t *testing.T) {
	fake := newFake(t)
	l := snowflake.JS53Layout()
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 17, Clock: fake})
	if !g.Layout().Equal(l) {
		t.Errorf("Layout() = %s, want %s", g.Layout().Describe(), l.Describe())
	}
	if g.WorkerID() != 17 {
		t.Errorf("WorkerID() = %d, want 17", g.WorkerID())
	}
	if got := g.Fence(); got != math.MaxInt64 {
		t.Errorf("Fence() = %d, want math.MaxInt64 (no fence)", got)
	}
	if got, want := g.LastIssued(), snowflake.DefaultEpoch.UnixMilli(); got != snowflake.UnixMilli(want) {
		t.Errorf("LastIssued() = %d, want the epoch %d", got, want)
	}
	if got := g.Behind(); got != 0 {
		t.Errorf("Behind() = %s, want 0", got)
	}
	if got := g.Stats(); got != (snowflake.Stats{}) {
		t.Errorf("Stats() = %+v, want zero", got)
	}
}

func TestGeneratorStrictlyIncreasing(t *testing.T) {
	tests := []struct {
		name   string
		l      snowflake.Layout
		worker int64
		step   time.Duration // the fake clock's auto step
	}{
		{name: "default worker 0", l: snowflake.DefaultLayout(), worker: 0, step: 7 * time.Microsecond},
		{name: "default worker 1023", l: snowflake.DefaultLayout(), worker: 1023, step: 70 * time.Nanosecond},
		{name: "default worker 555 nearly frozen", l: snowflake.DefaultLayout(), worker: 555, step: 10 * time.Nanosecond},
		{name: "js53 worker 31", l: snowflake.JS53Layout(), worker: 31, step: 3 * time.Microsecond},
		{name: "41/0/22", l: mustLayout(t, "41/0/22", time.Millisecond), worker: 0, step: 13 * time.Microsecond},
		{name: "39/16/8 at 10ms", l: mustLayout(t, "39/16/8", 10*time.Millisecond), worker: 65535, step: 41 * time.Microsecond},
		{name: "31/10/22 at 1s", l: mustLayout(t, "31/10/22", time.Second), worker: 1, step: time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const n = 20000
			fake := newFake(t)
			fake.SetAutoStep(tc.step)
			g := newGen(t, snowflake.Config{Layout: tc.l, WorkerID: tc.worker, Clock: fake})
			ids := make([]int64, 0, n)
			for range n {
				ids = append(ids, mustNext(t, g))
			}
			checkIncreasing(t, tc.l, ids, 0, tc.worker)
			first, last := mustDecode(t, tc.l, ids[0]), mustDecode(t, tc.l, ids[n-1])
			if first.Tick != tickAt(tc.l, genStart) || first.Sequence != 0 {
				t.Errorf("first ID %+v, want tick %d sequence 0", first, tickAt(tc.l, genStart))
			}
			// Never ahead of the clock, and the clock was read for every ID.
			if now := time.Unix(0, fake.WallNanos()); last.Time.After(now) {
				t.Errorf("last ID's time %s is after the clock %s", last.Time, now)
			}
			if minTicks := int64(n) / (tc.l.MaxSequence() + 1); last.Tick-first.Tick < minTicks {
				t.Errorf("%d IDs span ticks %d..%d, want at least %d ticks", n, first.Tick, last.Tick, minTicks)
			}
		})
	}
}

// An ID carries the tick the clock reads when it is issued.
func TestGeneratorUsesClockTick(t *testing.T) {
	fake := newFake(t)
	g := newGen(t, snowflake.Config{WorkerID: 9, Clock: fake})
	l := g.Layout()
	for _, d := range []time.Duration{0, 123456 * time.Microsecond, time.Hour + 999*time.Microsecond, 40 * 24 * time.Hour} {
		fake.Advance(d)
		now := time.Unix(0, fake.WallNanos())
		p := mustDecode(t, l, mustNext(t, g))
		if p.Tick != tickAt(l, now) || p.Sequence != 0 || p.WorkerID != 9 {
			t.Errorf("at %s: ID %+v, want tick %d sequence 0 worker 9", now, p, tickAt(l, now))
		}
		if want := now.Truncate(time.Millisecond).UnixMilli(); g.LastIssued() != snowflake.UnixMilli(want) {
			t.Errorf("LastIssued() = %d, want %d", g.LastIssued(), want)
		}
	}
}

func TestGeneratorRollbackWithinTolerance(t *testing.T) {
	tests := []struct {
		name      string
		back      time.Duration
		tolerance time.Duration // Config.RollbackTolerance
	}{
		{name: "2ms back, 5ms tolerance", back: 2 * time.Millisecond, tolerance: 5 * time.Millisecond},
		{name: "5ms back, 5ms tolerance", back: 5 * time.Millisecond, tolerance: 5 * time.Millisecond},
		{name: "1ms back, default tolerance", back: time.Millisecond},
		{name: "40ms back, 50ms tolerance", back: 40 * time.Millisecond, tolerance: 50 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			l := snowflake.JS53Layout() // 128 IDs per tick: runs out while the clock is behind
			g := newGen(t, snowflake.Config{Layout: l, WorkerID: 3, Clock: fake, RollbackTolerance: tc.tolerance})
			ids, err := g.NextN(10)
			if err != nil {
				t.Fatal(err)
			}
			fake.Advance(3 * time.Millisecond)
			more, err := g.NextN(10)
			if err != nil {
				t.Fatal(err)
			}
			last := more[9]
			ids = append(ids, more...)

			fake.StepWall(-tc.back)
			if got := g.Behind(); got != tc.back {
				t.Errorf("Behind() = %s, want %s", got, tc.back)
			}
			id, err := g.Next()
			if err != nil {
				t.Fatalf("Next %s behind with tolerance %s: %v", tc.back, tc.tolerance, err)
			}
			if id <= last {
				t.Fatalf("Next = %d after a rollback, not above the last %d", id, last)
			}
			ids = append(ids, id)
			// Run the behind tick's sequence out with one batch: its first
			// reservation takes the rest of the tick, its second waits (a
			// wait over 2ms sleeps for real, so the clock moves a quarter of
			// the rollback per read).
			fake.SetAutoStep(max(tc.back/4, 250*time.Microsecond))
			batch, err := g.NextN(int(l.MaxSequence()) + 10)
			if err != nil {
				t.Fatalf("NextN while behind: %v", err)
			}
			ids = append(ids, batch...)
			for range 3 * (l.MaxSequence() + 1) {
				ids = append(ids, mustNext(t, g))
			}
			checkIncreasing(t, l, ids, 0, 3)
			st := g.Stats()
			if st.RollbackWaits < 1 || st.Rollbacks != 0 || st.Waited <= 0 {
				t.Errorf("Stats() = %+v, want RollbackWaits >= 1, Rollbacks 0, Waited > 0", st)
			}
			if got := g.Behind(); got != 0 {
				t.Errorf("Behind() after catching up = %s, want 0", got)
			}
		})
	}
}

func TestGeneratorRollbackBeyondTolerance(t *testing.T) {
	tests := []struct {
		name          string
		back          time.Duration
		tolerance     time.Duration // Config.RollbackTolerance
		none          bool          // Config.NoRollbackTolerance
		wantTolerance time.Duration // in the RollbackError
	}{
		{name: "10ms back, default tolerance", back: 10 * time.Millisecond, wantTolerance: snowflake.DefaultRollbackTolerance},
		{name: "6ms back, 5ms tolerance", back: 6 * time.Millisecond, tolerance: 5 * time.Millisecond, wantTolerance: 5 * time.Millisecond},
		{name: "5.001ms back, 5ms tolerance", back: 5*time.Millisecond + time.Microsecond, tolerance: 5 * time.Millisecond, wantTolerance: 5 * time.Millisecond},
		{name: "1ns back, no tolerance", back: time.Nanosecond, none: true, wantTolerance: 0},
		{name: "1h back", back: time.Hour, tolerance: 5 * time.Millisecond, wantTolerance: 5 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			l := snowflake.DefaultLayout()
			g := newGen(t, snowflake.Config{Layout: l, WorkerID: 1, Clock: fake, RollbackTolerance: tc.tolerance, NoRollbackTolerance: tc.none})
			fake.Advance(20 * time.Millisecond)
			last := mustNext(t, g)

			fake.StepWall(-tc.back)
			id, err := g.Next()
			if err == nil {
				t.Fatalf("Next %s behind with tolerance %s = %d, want an error", tc.back, tc.tolerance, id)
			}
			if id != 0 {
				t.Errorf("Next returned ID %d with its error", id)
			}
			var rb *snowflake.RollbackError
			if !errors.As(err, &rb) {
				t.Fatalf("error %v (%T) is not a *RollbackError", err, err)
			}
			if !errors.Is(err, snowflake.ErrClockRollback) {
				t.Errorf("error %v does not wrap ErrClockRollback", err)
			}
			if rb.Behind != tc.back || rb.Tolerance != tc.wantTolerance {
				t.Errorf("RollbackError{Behind: %s, Tolerance: %s}, want {%s, %s}", rb.Behind, rb.Tolerance, tc.back, tc.wantTolerance)
			}
			if want := time.Unix(0, fake.WallNanos()); !rb.At.Equal(want) {
				t.Errorf("RollbackError.At = %v, want the reading that was behind, %v", rb.At, want)
			}
			if !strings.Contains(err.Error(), tc.back.String()) {
				t.Errorf("error %q does not say how far behind (%s)", err, tc.back)
			}
			if got := g.Behind(); got != tc.back {
				t.Errorf("Behind() = %s, want %s", got, tc.back)
			}
			// Batches are refused too, and leave dst alone.
			dst := []int64{42}
			if got, err := g.AppendN(dst, 5); !errors.As(err, &rb) || len(got) != 1 || got[0] != 42 {
				t.Errorf("AppendN while behind = %v, %v; want [42] and a *RollbackError", got, err)
			}
			if got, err := g.NextN(5); !errors.Is(err, snowflake.ErrClockRollback) || len(got) != 0 {
				t.Errorf("NextN while behind = %v, %v; want no IDs and ErrClockRollback", got, err)
			}
			if st := g.Stats(); st.Rollbacks != 3 {
				t.Errorf("Stats().Rollbacks = %d, want 3", st.Rollbacks)
			}

			// The clock recovers: IDs resume above the last.
			fake.Advance(tc.back)
			if got := g.Behind(); got != 0 {
				t.Errorf("Behind() after recovery = %s, want 0", got)
			}
			fake.SetAutoStep(time.Microsecond) // 5000 IDs need two ticks
			ids, err := g.NextN(5000)
			if err != nil {
				t.Fatalf("NextN after recovery: %v", err)
			}
			checkIncreasing(t, l, ids, last, 1)
		})
	}
}

// The 4097th ID of a tick waits for the next tick; nothing is reused.
func TestGeneratorSequenceOverflowWaits(t *testing.T) {
	fake := newFake(t) // frozen
	l := snowflake.DefaultLayout()
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 5, Clock: fake})
	tick := tickAt(l, genStart)
	ids, err := g.NextN(4096)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if want := l.Compose(tick, 5, int64(i)); id != want {
			t.Fatalf("ID #%d = %d, want tick %d sequence %d = %d", i, id, tick, i, want)
		}
	}

	type result struct {
		id  int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := g.Next()
		done <- result{id, err}
	}()
	waitFor(t, "the generator to wait for the next tick", func() bool { return g.Stats().SequenceWaits == 1 })
	select {
	case r := <-done:
		t.Fatalf("Next returned %d, %v while the clock was frozen in a used-up tick", r.id, r.err)
	default:
	}
	fake.Advance(time.Millisecond)
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after the clock moved to the next tick")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := l.Compose(tick+1, 5, 0); r.id != want {
		t.Errorf("Next after the wait = %d, want tick %d sequence 0 = %d", r.id, tick+1, want)
	}
	if st := g.Stats(); st.SequenceWaits != 1 || st.Waited != time.Millisecond || st.RollbackWaits != 0 {
		t.Errorf("Stats() = %+v, want SequenceWaits 1, Waited 1ms", st)
	}

	// With the clock creeping (100ns per read), many ticks' worth: no
	// duplicate, ticks advance, every tick used up before the next.
	fake.SetAutoStep(100 * time.Nanosecond)
	more := make([]int64, 0, 5*4096)
	for range 5 * 4096 {
		more = append(more, mustNext(t, g))
	}
	checkIncreasing(t, l, more, r.id, 5)
	if p := mustDecode(t, l, more[len(more)-1]); p.Tick < tick+6 {
		t.Errorf("after 5×4096 more IDs the tick is %d, want at least %d", p.Tick, tick+6)
	}
	if st := g.Stats(); st.SequenceWaits < 6 {
		t.Errorf("Stats().SequenceWaits = %d, want at least 6", st.SequenceWaits)
	}
}

func TestGeneratorFence(t *testing.T) {
	fake := newFake(t)
	l := snowflake.DefaultLayout()
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 2, Clock: fake})
	start := genStart.UnixMilli()

	g.SetFence(snowflake.UnixMilli(start + 2))
	if got := g.Fence(); got != snowflake.UnixMilli(start+2) {
		t.Errorf("Fence() = %d, want %d", got, start+2)
	}
	a := mustNext(t, g)
	fake.Advance(2 * time.Millisecond) // at the fence: allowed
	b := mustNext(t, g)
	fake.Advance(time.Millisecond) // beyond it
	if id, err := g.Next(); !errors.Is(err, snowflake.ErrFenceReached) || id != 0 {
		t.Fatalf("Next beyond the fence = %d, %v; want 0, ErrFenceReached", id, err)
	}
	if ids, err := g.NextN(3); !errors.Is(err, snowflake.ErrFenceReached) || len(ids) != 0 {
		t.Fatalf("NextN beyond the fence = %v, %v; want none, ErrFenceReached", ids, err)
	}
	if st := g.Stats(); st.FenceHits != 2 {
		t.Errorf("Stats().FenceHits = %d, want 2", st.FenceHits)
	}
	if got, want := g.LastIssued(), start+2; got != snowflake.UnixMilli(want) {
		t.Errorf("LastIssued() = %d, want %d (the fence tick)", got, want)
	}

	// Moving the fence lets the generator go on, above everything issued.
	g.SetFence(snowflake.UnixMilli(start + 3000))
	c := mustNext(t, g)
	checkIncreasing(t, l, []int64{a, b, c}, 0, 2)
	if p := mustDecode(t, l, c); p.Tick != tickAt(l, genStart)+3 {
		t.Errorf("after SetFence the ID's tick is %d, want %d", p.Tick, tickAt(l, genStart)+3)
	}

	// A fence behind the last issued tick stops everything.
	g.SetFence(snowflake.UnixMilli(start))
	if _, err := g.Next(); !errors.Is(err, snowflake.ErrFenceReached) {
		t.Errorf("Next with the fence behind the last ID: %v, want ErrFenceReached", err)
	}

	// math.MaxInt64, what Fence reports for "no fence", is no fence.
	g.SetFence(math.MaxInt64)
	if got := g.Fence(); got != math.MaxInt64 {
		t.Errorf("after SetFence(math.MaxInt64) Fence() = %d, want math.MaxInt64", got)
	}
	fake.Advance(time.Hour)
	if _, err := g.Next(); err != nil {
		t.Errorf("Next with no fence: %v", err)
	}
	// So is any fence beyond the layout's end.
	for _, f := range []int64{1 << 62, 1 << 53, l.End().UnixMilli()} {
		g.SetFence(snowflake.UnixMilli(f))
		if _, err := g.Next(); err != nil {
			t.Errorf("Next with the fence at %d: %v", f, err)
		}
	}
	// A fence before the epoch stops everything.
	for _, f := range []int64{snowflake.DefaultEpoch.UnixMilli() - 1, 0, -1, math.MinInt64} {
		g.SetFence(snowflake.UnixMilli(f))
		if _, err := g.Next(); !errors.Is(err, snowflake.ErrFenceReached) {
			t.Errorf("Next with the fence at %d: %v, want ErrFenceReached", f, err)
		}
		if got := g.Fence(); got >= snowflake.UnixMilliOf(snowflake.DefaultEpoch) {
			t.Errorf("after SetFence(%d) Fence() = %d, not before the epoch", f, got)
		}
	}
}

// The sequence runs out in the fence tick: the wait ends at the fence.
func TestGeneratorFenceDuringSequenceWait(t *testing.T) {
	fake := newFake(t)
	fake.SetAutoStep(time.Microsecond)
	g := newGen(t, snowflake.Config{Layout: snowflake.JS53Layout(), Clock: fake})
	g.SetFence(snowflake.UnixMilliOf(genStart))
	n := 0
	for ; n < 1000; n++ {
		if _, err := g.Next(); err != nil {
			if !errors.Is(err, snowflake.ErrFenceReached) {
				t.Fatalf("Next #%d: %v, want ErrFenceReached", n, err)
			}
			break
		}
	}
	if n != 128 {
		t.Errorf("issued %d IDs before the fence, want one tick's 128", n)
	}
}

func TestGeneratorFenceCoarseUnit(t *testing.T) {
	fake := newFake(t)
	l := mustLayout(t, "39/16/8", 10*time.Millisecond)
	g := newGen(t, snowflake.Config{Layout: l, Clock: fake})
	g.SetFence(snowflake.UnixMilli(genStart.UnixMilli() + 17)) // inside the tick starting at +10ms
	if got, want := g.Fence(), genStart.UnixMilli()+10; got != snowflake.UnixMilli(want) {
		t.Errorf("Fence() = %d, want the fence tick's start %d", got, want)
	}
	fake.Advance(19 * time.Millisecond)
	if _, err := g.Next(); err != nil {
		t.Errorf("Next in the fence tick: %v", err)
	}
	fake.Advance(time.Millisecond)
	if _, err := g.Next(); !errors.Is(err, snowflake.ErrFenceReached) {
		t.Errorf("Next after the fence tick: %v, want ErrFenceReached", err)
	}
	// The tick containing math.MinInt64 ms starts before any int64 ms.
	if g.SetFence(math.MinInt64); g.Fence() != math.MinInt64 {
		t.Errorf("after SetFence(math.MinInt64) Fence() = %d, want math.MinInt64", g.Fence())
	}
}

func TestGeneratorAfterUnixMilli(t *testing.T) {
	ms := genStart.UnixMilli()
	tests := []struct {
		name     string
		unit     time.Duration
		after    int64
		wantTick time.Duration // the first ID's tick starts this far from genStart
		wantBack time.Duration // >0: the first Next fails this far behind, then the clock catches up
	}{
		{name: "10ms before", unit: time.Millisecond, after: ms - 10, wantTick: 0},
		{name: "1ms before", unit: time.Millisecond, after: ms - 1, wantTick: 0},
		{name: "same tick", unit: time.Millisecond, after: ms, wantTick: time.Millisecond},
		{name: "3ms ahead, within tolerance", unit: time.Millisecond, after: ms + 3, wantTick: 4 * time.Millisecond},
		{name: "5ms ahead, at tolerance", unit: time.Millisecond, after: ms + 5, wantTick: 6 * time.Millisecond},
		{name: "7ms ahead, beyond tolerance", unit: time.Millisecond, after: ms + 7, wantBack: 7 * time.Millisecond, wantTick: 8 * time.Millisecond},
		{name: "1s ahead", unit: time.Millisecond, after: ms + 1000, wantBack: time.Second, wantTick: 1001 * time.Millisecond},
		{name: "10ms unit, same tick", unit: 10 * time.Millisecond, after: ms + 3, wantTick: 10 * time.Millisecond},
		{name: "10ms unit, tick before", unit: 10 * time.Millisecond, after: ms - 1, wantTick: 0},
		{name: "before the epoch", unit: time.Millisecond, after: snowflake.DefaultEpoch.UnixMilli() - 5000, wantTick: 0},
		{name: "negative", unit: time.Millisecond, after: -1, wantTick: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			l := mustLayout(t, "41/10/12", tc.unit)
			g := newGen(t, snowflake.Config{Layout: l, WorkerID: 7, Clock: fake, After: snowflake.UnixMilli(tc.after)})
			afterTick := max(l.TickOf(tc.after*int64(time.Millisecond)), 0)
			if got, want := g.LastIssued(), l.TickStart(afterTick)/int64(time.Millisecond); got != snowflake.UnixMilli(want) {
				t.Errorf("LastIssued() before any ID = %d, want %d", got, want)
			}
			if tc.wantBack > 0 {
				_, err := g.Next()
				var rb *snowflake.RollbackError
				if !errors.As(err, &rb) || rb.Behind != tc.wantBack {
					t.Fatalf("Next with the clock %s behind After: %v, want a *RollbackError %s behind", tc.wantBack, err, tc.wantBack)
				}
				fake.Advance(tc.wantBack)
			}
			// Waits of several ms sleep for real: step 500µs (a divisor of every tick here).
			fake.SetAutoStep(max(autoStep(l), 500*time.Microsecond))
			id := mustNext(t, g)
			p := mustDecode(t, l, id)
			if p.Tick <= afterTick && tc.after > snowflake.DefaultEpoch.UnixMilli() {
				t.Errorf("first ID's tick %d is not after After's tick %d", p.Tick, afterTick)
			}
			if want := tickAt(l, genStart.Add(tc.wantTick)); p.Tick != want || p.Sequence != 0 {
				t.Errorf("first ID %+v, want tick %d (genStart%+v) sequence 0", p, want, tc.wantTick)
			}
		})
	}
}

// A new generator started after the old one's LastIssued (a graceful
// stop) or Fence (a crash) never issues one of its IDs again, even
// on the same clock in the same tick.
func TestGeneratorRestartNeverReissues(t *testing.T) {
	tests := []struct {
		name  string
		l     snowflake.Layout
		fence bool // restart from the fence instead of the last ID
	}{
		{name: "1ms from last", l: snowflake.DefaultLayout()},
		{name: "1ms from fence", l: snowflake.DefaultLayout(), fence: true},
		{name: "10ms from last", l: mustLayout(t, "39/16/8", 10*time.Millisecond)},
		{name: "10ms from fence", l: mustLayout(t, "39/16/8", 10*time.Millisecond), fence: true},
		{name: "js53 from last", l: snowflake.JS53Layout()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			fake.Advance(3*time.Millisecond + 500*time.Microsecond)
			old := newGen(t, snowflake.Config{Layout: tc.l, WorkerID: 4, Clock: fake})
			old.SetFence(snowflake.UnixMilli(fake.WallNanos() / int64(time.Millisecond)))
			ids, err := old.NextN(10)
			if err != nil {
				t.Fatal(err)
			}
			after := old.LastIssued()
			if tc.fence {
				after = old.Fence()
			}
			fake.SetAutoStep(autoStep(tc.l))
			g := newGen(t, snowflake.Config{Layout: tc.l, WorkerID: 4, Clock: fake, After: after})
			next := mustNext(t, g)
			if next <= ids[len(ids)-1] {
				t.Errorf("restarted generator's first ID %d is not above the old one's last %d", next, ids[len(ids)-1])
			}
		})
	}
}

func TestGeneratorTimeOverflow(t *testing.T) {
	// 20 bits of 1ms: the clock starts two ticks before the last.
	l := snowflake.Layout{TimeBits: 20, WorkerBits: 10, SequenceBits: 12, Unit: time.Millisecond,
		Epoch: genStart.Add(-time.Duration(1<<20-2) * time.Millisecond)}
	fake := newFake(t)
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: l.MaxWorkerID(), Clock: fake})
	g.SetFence(snowflake.UnixMilliOf(genStart.Add(48 * time.Hour))) // a fence beyond the end changes nothing

	first := mustNext(t, g)
	if p := mustDecode(t, l, first); p.Tick != l.MaxTick()-1 {
		t.Fatalf("first ID's tick %d, want MaxTick-1 = %d", p.Tick, l.MaxTick()-1)
	}
	fake.Advance(time.Millisecond)
	ids, err := g.NextN(4096) // the whole last tick
	if err != nil {
		t.Fatal(err)
	}
	checkIncreasing(t, l, ids, first, l.MaxWorkerID())
	if ids[4095] != l.MaxID() {
		t.Errorf("last ID of the last tick = %d, want MaxID %d", ids[4095], l.MaxID())
	}
	// The last tick is used up: waiting for the next one overflows.
	fake.SetAutoStep(time.Microsecond)
	if id, err := g.Next(); !errors.Is(err, snowflake.ErrTimeOverflow) || id != 0 {
		t.Fatalf("Next after the last tick = %d, %v; want 0, ErrTimeOverflow", id, err)
	}
	dst := []int64{1, 2}
	if got, err := g.AppendN(dst, 10); !errors.Is(err, snowflake.ErrTimeOverflow) || len(got) != 2 {
		t.Errorf("AppendN after the last tick = %v, %v; want [1 2], ErrTimeOverflow", got, err)
	}
	fake.SetAutoStep(0)
	fake.Advance(24 * time.Hour)
	if id, err := g.Next(); !errors.Is(err, snowflake.ErrTimeOverflow) || id != 0 {
		t.Errorf("Next a day after the end = %d, %v; want 0, ErrTimeOverflow", id, err)
	}
	if g.LastIssued() != snowflake.UnixMilliOf(l.End())-1 {
		t.Errorf("LastIssued() = %d, want the last tick %d", g.LastIssued(), l.End().UnixMilli()-1)
	}

	// A batch that starts in the last tick and would run past it.
	fake2 := clocktest.NewFake(genStart.Add(time.Millisecond))
	fake2.SetAutoStep(time.Microsecond)
	g2 := newGen(t, snowflake.Config{Layout: l, Clock: fake2})
	if got, err := g2.NextN(5000); !errors.Is(err, snowflake.ErrTimeOverflow) || len(got) != 0 {
		t.Errorf("NextN(5000) from the last tick = %d IDs, %v; want none, ErrTimeOverflow", len(got), err)
	}
}

func TestGeneratorBeforeEpoch(t *testing.T) {
	fake := clocktest.NewFake(snowflake.DefaultEpoch.Add(-time.Hour))
	g := newGen(t, snowflake.Config{Clock: fake})
	id, err := g.Next()
	if !errors.Is(err, snowflake.ErrBeforeEpoch) || id != 0 {
		t.Fatalf("Next an hour before the epoch = %d, %v; want 0, ErrBeforeEpoch", id, err)
	}
	if got := g.Behind(); got != time.Hour {
		t.Errorf("Behind() = %s, want 1h", got)
	}
	fake.Advance(time.Hour + time.Millisecond)
	if p := mustDecode(t, g.Layout(), mustNext(t, g)); p.Tick != 1 {
		t.Errorf("first ID after the epoch has tick %d, want 1", p.Tick)
	}
}

func TestGeneratorClockStalled(t *testing.T) {
	tests := []struct {
		name string
		back time.Duration // wall step back before the sequence runs out
		l    snowflake.Layout
	}{
		{name: "frozen in a used-up tick", l: snowflake.DefaultLayout()},
		{name: "frozen behind, within tolerance", back: 3 * time.Millisecond, l: snowflake.DefaultLayout()},
		{name: "frozen, 10ms ticks", l: mustLayout(t, "39/16/8", 10*time.Millisecond)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			clk := stalledClock{Fake: fake, step: 50 * time.Millisecond}
			g := newGen(t, snowflake.Config{Layout: tc.l, Clock: clk})
			if _, err := g.Next(); err != nil {
				t.Fatal(err)
			}
			fake.StepWall(-tc.back)
			if _, err := g.NextN(int(tc.l.MaxSequence())); err != nil {
				t.Fatal(err)
			}
			before := clk.Fake.Mono()
			id, err := g.Next()
			if !errors.Is(err, snowflake.ErrClockStalled) || id != 0 {
				t.Fatalf("Next with a stuck clock = %d, %v; want 0, ErrClockStalled", id, err)
			}
			// It gave up after tolerance + 2 ticks + 1s of monotonic time, not much later.
			limit := snowflake.DefaultRollbackTolerance + 2*tc.l.Unit + time.Second
			if waited := clk.Fake.Mono() - before; waited <= limit || waited > limit+4*clk.step {
				t.Errorf("gave up after %s of monotonic time, want just over %s", waited, limit)
			}
			st := g.Stats()
			if tc.back > 0 && st.RollbackWaits != 1 || tc.back == 0 && st.SequenceWaits != 1 {
				t.Errorf("Stats() = %+v, want one wait of the right kind", st)
			}
		})
	}
}

func TestGeneratorInvalidCount(t *testing.T) {
	g := newGen(t, snowflake.Config{Clock: newFake(t)})
	for _, n := range []int{0, -1, math.MinInt} {
		if ids, err := g.NextN(n); !errors.Is(err, snowflake.ErrInvalidCount) || ids != nil {
			t.Errorf("NextN(%d) = %v, %v; want nil, ErrInvalidCount", n, ids, err)
		}
		dst := make([]int64, 2, 8)
		got, err := g.AppendN(dst, n)
		if !errors.Is(err, snowflake.ErrInvalidCount) || len(got) != 2 || &got[0] != &dst[0] {
			t.Errorf("AppendN(dst, %d) = %v, %v; want dst unchanged, ErrInvalidCount", n, got, err)
		}
	}
	if st := g.Stats(); st != (snowflake.Stats{}) {
		t.Errorf("invalid counts moved Stats() to %+v", st)
	}
	// Nothing was reserved.
	if p := mustDecode(t, g.Layout(), mustNext(t, g)); p.Sequence != 0 {
		t.Errorf("first ID after invalid counts has sequence %d, want 0", p.Sequence)
	}
}

func TestGeneratorBatches(t *testing.T) {
	tests := []struct {
		name     string
		l        snowflake.Layout
		n        int
		minTicks int64
	}{
		{name: "1 at 41/10/12", l: snowflake.DefaultLayout(), n: 1, minTicks: 1},
		{name: "4096 at 41/10/12", l: snowflake.DefaultLayout(), n: 4096, minTicks: 1},
		{name: "10000 at 41/10/12", l: snowflake.DefaultLayout(), n: 10000, minTicks: 3},
		{name: "1000 at js53", l: snowflake.JS53Layout(), n: 1000, minTicks: 8},
		{name: "100000 at 41/0/22", l: mustLayout(t, "41/0/22", time.Millisecond), n: 100000, minTicks: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			fake.SetAutoStep(time.Microsecond)
			g := newGen(t, snowflake.Config{Layout: tc.l, WorkerID: tc.l.MaxWorkerID(), Clock: fake})
			pre := mustNext(t, g)
			ids, err := g.NextN(tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != tc.n {
				t.Fatalf("NextN(%d) returned %d IDs", tc.n, len(ids))
			}
			checkIncreasing(t, tc.l, ids, pre, tc.l.MaxWorkerID())
			ticks := map[int64]bool{}
			for _, id := range ids {
				ticks[mustDecode(t, tc.l, id).Tick] = true
			}
			if int64(len(ticks)) < tc.minTicks {
				t.Errorf("%d IDs span %d ticks, want at least %d", tc.n, len(ticks), tc.minTicks)
			}
			// AppendN keeps what dst holds.
			dst := []int64{-3, -2, -1}
			got, err := g.AppendN(dst, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3+tc.n || !slices.Equal(got[:3], dst) {
				t.Fatalf("AppendN onto 3 IDs returned %d with prefix %v", len(got), got[:min(3, len(got))])
			}
			checkIncreasing(t, tc.l, got[3:], ids[len(ids)-1], tc.l.MaxWorkerID())
		})
	}
}

// A batch refused half-way returns dst unchanged, and the IDs it reserved
// are never issued.
func TestGeneratorAppendNFailsHalfway(t *testing.T) {
	fake := newFake(t)
	fake.SetAutoStep(time.Microsecond)
	l := snowflake.DefaultLayout()
	g := newGen(t, snowflake.Config{Layout: l, Clock: fake})
	g.SetFence(snowflake.UnixMilliOf(genStart))
	dst := make([]int64, 1, 10000)
	dst[0] = 99
	got, err := g.AppendN(dst, 5000)
	if !errors.Is(err, snowflake.ErrFenceReached) {
		t.Fatalf("AppendN(5000) across the fence: %v, want ErrFenceReached", err)
	}
	if len(got) != 1 || got[0] != 99 {
		t.Errorf("AppendN on error returned %v, want dst unchanged", got[:min(len(got), 5)])
	}
	g.SetFence(snowflake.UnixMilli(genStart.UnixMilli() + 1000))
	if p := mustDecode(t, l, mustNext(t, g)); p.Tick <= tickAt(l, genStart) {
		t.Errorf("next ID's tick %d: the failed batch's tick %d was reused", p.Tick, tickAt(l, genStart))
	}
}

// checkUnique fails the test unless every ID of every goroutine is unique
// and each goroutine's IDs increase, and (unless want is -1) each goroutine
// has want IDs.
func checkUnique(t *testing.T, l snowflake.Layout, worker int64, perG [][]int64, want int) {
	t.Helper()
	var all []int64
	for i, ids := range perG {
		if want >= 0 && len(ids) != want {
			t.Errorf("goroutine %d got %d IDs, want %d", i, len(ids), want)
		}
		checkIncreasing(t, l, ids, 0, worker)
		all = append(all, ids...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("ID %d issued twice", all[i])
		}
	}
}

// concurrentIDs has each of goroutines take perG IDs from g, mixing Next and
// AppendN, and returns each goroutine's IDs in the order it got them.
func concurrentIDs(t *testing.T, g *snowflake.Generator, goroutines, perG int) [][]int64 {
	t.Helper()
	out := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			ids := make([]int64, 0, perG)
			for i := 0; len(ids) < perG; i++ {
				var err error
				if i%7 == w%7 { // a batch now and then, of 1..64
					ids, err = g.AppendN(ids, min(1+(i*31+w)%64, perG-len(ids)))
				} else {
					var id int64
					if id, err = g.Next(); err == nil {
						ids = append(ids, id)
					}
				}
				if err != nil {
					t.Errorf("goroutine %d after %d IDs: %v", w, len(ids), err)
					break
				}
			}
			out[w] = ids
		})
	}
	wg.Wait()
	return out
}

func TestGeneratorConcurrentRealClock(t *testing.T) {
	const goroutines, perG = 8, 20000
	l := snowflake.DefaultLayout()
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 600, Clock: clock.NewSystem()})
	perGIDs := concurrentIDs(t, g, goroutines, perG)
	checkUnique(t, l, 600, perGIDs, perG)
	if st := g.Stats(); st.Rollbacks != 0 || st.FenceHits != 0 {
		t.Errorf("Stats() = %+v", st)
	}
	if last, now := g.LastIssued(), time.Now().UnixMilli(); last > snowflake.UnixMilli(now) {
		t.Errorf("LastIssued() %d is ahead of the clock %d", last, now)
	}
}

// Small ticks, a creeping fake clock: most IDs race for the tick boundary.
func TestGeneratorConcurrentTickBoundaries(t *testing.T) {
	const goroutines, perG = 8, 5000
	fake := newFake(t)
	fake.SetAutoStep(time.Microsecond)
	l := snowflake.JS53Layout()
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 31, Clock: fake})
	checkUnique(t, l, 31, concurrentIDs(t, g, goroutines, perG), perG)
	if st := g.Stats(); st.SequenceWaits == 0 {
		t.Errorf("Stats() = %+v, want sequence waits", st)
	}
}

// Goroutines take IDs while the wall clock jumps back and forth: within
// the tolerance nothing fails; beyond it requests fail, but no ID is ever
// issued twice or below one issued before it.
func TestGeneratorConcurrentClockSteps(t *testing.T) {
	tests := []struct {
		name     string
		back     time.Duration
		wantErrs bool
	}{
		{name: "3ms steps, 5ms tolerance", back: 3 * time.Millisecond},
		{name: "20ms steps, 5ms tolerance", back: 20 * time.Millisecond, wantErrs: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const goroutines, perG, maxTries = 8, 3000, 100000
			fake := newFake(t)
			fake.SetAutoStep(time.Microsecond)
			l := snowflake.JS53Layout()
			g := newGen(t, snowflake.Config{Layout: l, WorkerID: 30, Clock: fake, RollbackTolerance: 5 * time.Millisecond})
			mustNext(t, g)
			fake.StepWall(-tc.back) // every worker's first call sees this one

			stop := make(chan struct{})
			driverDone := make(chan struct{})
			go func() { // the clock: forward again, then back, until the workers finish
				defer close(driverDone)
				for i := 0; i < 1_000_000; i++ {
					time.Sleep(50 * time.Microsecond)
					fake.StepWall(tc.back + time.Millisecond)
					time.Sleep(50 * time.Microsecond)
					select {
					case <-stop:
						return
					default:
					}
					fake.StepWall(-tc.back)
				}
			}()
			out := make([][]int64, goroutines)
			var rollbackErrs, otherErrs atomicCounter
			var wg sync.WaitGroup
			for w := range goroutines {
				wg.Go(func() {
					ids := make([]int64, 0, perG)
					for try := 0; len(ids) < perG && try < maxTries; try++ {
						id, err := g.Next()
						switch {
						case err == nil:
							ids = append(ids, id)
						case errors.Is(err, snowflake.ErrClockRollback):
							rollbackErrs.add()
						default:
							otherErrs.add()
							t.Errorf("goroutine %d: %v", w, err)
						}
					}
					out[w] = ids
				})
			}
			wg.Wait()
			close(stop)
			<-driverDone
			want := perG
			if tc.wantErrs { // errors may use up a goroutine's tries
				want = -1
			}
			checkUnique(t, l, 30, out, want)
			if got := rollbackErrs.load(); tc.wantErrs != (got > 0) {
				t.Errorf("%d rollback errors, want errors: %v", got, tc.wantErrs)
			}
			if total := len(slices.Concat(out...)); total == 0 {
				t.Error("no IDs at all")
			}
		})
	}
}

// atomicCounter counts from several goroutines.
type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) add() { c.mu.Lock(); c.n++; c.mu.Unlock() }

func (c *atomicCounter) load() int { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// RaiseFloor while serving: later IDs carry a tick after the floor's, a
// lower floor changes nothing, and a floor past the layout's end is refused.
func TestGeneratorRaiseFloor(t *testing.T) {
	ms := genStart.UnixMilli()
	l := mustLayout(t, "41/10/12", time.Millisecond)
	tests := []struct {
		name     string
		floor    int64 // Unix ms
		wantTick time.Duration
		wantErr  error
	}{
		{name: "below the last ID", floor: ms - 100, wantTick: 0},
		{name: "same tick as the last ID", floor: ms, wantTick: time.Millisecond},
		{name: "ahead within tolerance", floor: ms + 3, wantTick: 4 * time.Millisecond},
		{name: "past the layout's end", floor: l.End().UnixMilli() + 1000, wantErr: snowflake.ErrTimeOverflow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake(t)
			g := newGen(t, snowflake.Config{Layout: l, WorkerID: 3, Clock: fake})
			first := mustDecode(t, l, mustNext(t, g))
			err := g.RaiseFloor(snowflake.UnixMilli(tc.floor))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("RaiseFloor(%d) = %v, want %v", tc.floor, err, tc.wantErr)
			}
			fake.SetAutoStep(500 * time.Microsecond)
			p := mustDecode(t, l, mustNext(t, g))
			if tc.wantErr != nil || tc.wantTick == 0 {
				if p.Tick != first.Tick || p.Sequence != first.Sequence+1 {
					t.Errorf("after a floor that changes nothing: %+v, want the next sequence after %+v", p, first)
				}
				return
			}
			if want := tickAt(l, genStart.Add(tc.wantTick)); p.Tick != want || p.Sequence != 0 {
				t.Errorf("first ID after RaiseFloor(%d): %+v, want tick %d sequence 0", tc.floor, p, want)
			}
		})
	}
}

// RaiseFloor racing ID requests: no ID issued after RaiseFloor returned has
// a tick at or below the floor, and IDs stay strictly increasing.
func TestGeneratorRaiseFloorConcurrent(t *testing.T) {
	l := snowflake.DefaultLayout()
	// A floor 20ms ahead is waited out, not refused, with this tolerance.
	g := newGen(t, snowflake.Config{Layout: l, WorkerID: 1, Clock: clock.NewSystem(), RollbackTolerance: time.Second})
	floor := time.Now().Add(20 * time.Millisecond).UnixMilli()
	floorTick := l.TickOf(floor * int64(time.Millisecond))
	var raised sync.WaitGroup
	raised.Add(1)
	var wg sync.WaitGroup
	after := make([][]int64, 4)
	for w := range after {
		wg.Go(func() {
			for range 200 {
				if _, err := g.Next(); err != nil {
					t.Errorf("Next: %v", err)
					return
				}
			}
			raised.Wait()
			for range 200 {
				id, err := g.Next()
				if err != nil {
					t.Errorf("Next: %v", err)
					return
				}
				after[w] = append(after[w], id)
			}
		})
	}
	if err := g.RaiseFloor(snowflake.UnixMilli(floor)); err != nil {
		t.Fatal(err)
	}
	raised.Done()
	wg.Wait()
	for w, ids := range after {
		for i, id := range ids {
			if p := mustDecode(t, l, id); p.Tick <= floorTick {
				t.Fatalf("goroutine %d ID %d after RaiseFloor has tick %d <= floor tick %d", w, i, p.Tick, floorTick)
			}
			if i > 0 && id <= ids[i-1] {
				t.Fatalf("goroutine %d: IDs not increasing: %d then %d", w, ids[i-1], id)
			}
		}
	}
}
