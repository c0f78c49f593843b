package fencing

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fakeStore records persisted fences and fails while told to.
type fakeStore struct {
	mu     sync.Mutex
	saved  []snowflake.UnixMilli
	failOn bool
}

func (s *fakeStore) persist(f snowflake.UnixMilli) (snowflake.UnixMilli, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failOn {
		return 0, errors.New("disk full")
	}
	s.saved = append(s.saved, f)
	return f, nil
}

func (s *fakeStore) fail(on bool) { s.mu.Lock(); s.failOn = on; s.mu.Unlock() }

func (s *fakeStore) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.saved) }

type fakeGen struct {
	mu          sync.Mutex
	fence, last snowflake.UnixMilli
}

func (g *fakeGen) SetFence(f snowflake.UnixMilli)  { g.mu.Lock(); g.fence = f; g.mu.Unlock() }
func (g *fakeGen) get() snowflake.UnixMilli        { g.mu.Lock(); defer g.mu.Unlock(); return g.fence }
func (g *fakeGen) LastIssued() snowflake.UnixMilli { g.mu.Lock(); defer g.mu.Unlock(); return g.last }

func TestFenceKeeperExtend(t *testing.T) {
	start := time.UnixMilli(1_750_000_000_000)
	const ahead = 3 * time.Second
	type step struct {
		advance  time.Duration // Advance (positive) or StepWall (negative) before Extend
		failSave bool
		want     int64 // persisted fence after the step (ms after start)
		wantGen  int64 // generator fence after the step (ms after start)
		wantErr  bool
		ready    bool
		last     int64 // non-zero: the generator's last issued tick (or raised floor), ms after start
	}
	tests := []struct {
		name    string
		initial int64 // ms after start; -start for none
		steps   []step
	}{
		{"first start moves fence ahead", -1, []step{
			{0, false, 3000, 3000, false, true, 0},
			{time.Second, false, 4000, 4000, false, true, 0},
		}},
		{"clock going back never lowers the fence", -1, []step{
			{0, false, 3000, 3000, false, true, 0},
			{-10 * time.Second, false, 3000, 3000, false, true, 0},
			{5 * time.Second, false, 3000, 3000, false, true, 0},  // now = -5s, now+ahead = -2s
			{10 * time.Second, false, 8000, 8000, false, true, 0}, // now = +5s
		}},
		{"cached fence ahead of now is kept", 60_000, []step{
			{0, false, 60_000, 60_000, false, true, 0},
		}},
		{"a floor raised while serving reaches the disk", -1, []step{
			{0, false, 3000, 3000, false, true, 0},
			{time.Second, false, 20_000, 20_000, false, true, 20_000},
			{time.Second, false, 20_000, 20_000, false, true, 0},
		}},
		{"failed save keeps generator at old fence, then recovers", -1, []step{
			{0, false, 3000, 3000, false, true, 0},
			{time.Second, true, 3000, 3000, true, false, 0},
			{time.Second, true, 3000, 3000, true, false, 0},
			{time.Second, false, 6000, 6000, false, true, 0},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(start)
			g := health.New(zerolog.Nop(), nil)
			gen, store := &fakeGen{}, &fakeStore{}
			initial := int64(0)
			if tc.initial >= 0 {
				initial = start.UnixMilli() + tc.initial
			}
			k := NewKeeper(g, clk, gen, ahead, snowflake.UnixMilli(initial), store.persist, zerolog.Nop())
			if g.Ready() {
				t.Fatal("ready before the first fence write")
			}
			for i, s := range tc.steps {
				if s.advance >= 0 {
					clk.Advance(s.advance)
				} else {
					clk.StepWall(s.advance)
				}
				store.fail(s.failSave)
				if s.last != 0 {
					gen.mu.Lock()
					gen.last = snowflake.UnixMilli(start.UnixMilli() + s.last)
					gen.mu.Unlock()
				}
				err := k.Extend(context.Background())
				if (err != nil) != s.wantErr {
					t.Fatalf("step %d: Extend error %v, want error %v", i, err, s.wantErr)
				}
				if got := k.Persisted() - snowflake.UnixMilliOf(start); got != snowflake.UnixMilli(s.want) {
					t.Errorf("step %d: persisted fence %+d ms, want %+d", i, got, s.want)
				}
				if got := gen.get() - snowflake.UnixMilliOf(start); got != snowflake.UnixMilli(s.wantGen) {
					t.Errorf("step %d: generator fence %+d ms, want %+d", i, got, s.wantGen)
				}
				if g.Ready() != s.ready {
					t.Errorf("step %d: ready %v (%+v), want %v", i, g.Ready(), g.Status(), s.ready)
				}
				if !s.ready && g.Status().Reason != health.ReasonFencePersist {
					t.Errorf("step %d: reason %q, want %q", i, g.Status().Reason, health.ReasonFencePersist)
				}
			}
		})
	}
}

func TestFenceKeeperPersistFinalLowers(t *testing.T) {
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	store := &fakeStore{}
	k := NewKeeper(health.New(zerolog.Nop(), nil), clk, &fakeGen{}, 3*time.Second, 0, store.persist, zerolog.Nop())
	if err := k.Extend(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := clk.WallNanos()/1e6 - 5
	if err := k.PersistFinal(context.Background(), snowflake.UnixMilli(last), time.Second); err != nil {
		t.Fatal(err)
	}
	if k.Persisted() != snowflake.UnixMilli(last) {
		t.Errorf("persisted %d, want %d", k.Persisted(), last)
	}
	store.fail(true)
	if err := k.PersistFinal(context.Background(), snowflake.UnixMilli(last), time.Second); err == nil {
		t.Error("PersistFinal hid a failed write")
	}
}

func TestFenceKeeperRunExtendsAndStops(t *testing.T) {
	clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	store := &fakeStore{}
	k := NewKeeper(health.New(zerolog.Nop(), nil), clk, &fakeGen{}, 30*time.Millisecond, 0, store.persist, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { k.Run(ctx); close(done) }()
	k.Wake()
	deadline := time.Now().Add(5 * time.Second)
	for store.count() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d fence writes in 5s with a 10ms interval", store.count())
		}
		clk.Advance(10 * time.Millisecond)
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// gatedGen holds its first LastIssued (the start of an extension) until
// open is closed.
type gatedGen struct {
	fakeGen
	open chan struct{}
	once sync.Once
}

func (g *gatedGen) LastIssued() snowflake.UnixMilli {
	g.once.Do(func() { <-g.open })
	return g.fakeGen.LastIssued()
}

// A tick and a wake pending together start one extension: whichever of
// them Run's select takes, it takes the other too, or the other would start
// a second extension in some runs and not in others (a simulation's seed
// would not replay).
func TestFenceKeeperTickAndWakeTogetherExtendOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ahead = 3 * time.Second // Run extends every ahead/3
		clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
		store := &fakeStore{}
		gen := &gatedGen{open: make(chan struct{})}
		k := NewKeeper(health.New(zerolog.Nop(), nil), clk, gen, ahead, 0, store.persist, zerolog.Nop())
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { k.Run(ctx); close(done) }()
		k.Wake()              // the first extension starts, and waits at the gate
		time.Sleep(ahead / 3) // a tick comes due meanwhile
		k.Wake()              // and a wake
		close(gen.open)
		synctest.Wait()
		got := store.count()
		cancel()
		<-done
		if got != 2 {
			t.Fatalf("the first extension and a tick and a wake pending together made %d fence writes, want 2", got)
		}
	})
}

// A write that hangs (not fails): Extend gives up at the deadline with the
// check failing; Persisted never waits for it; no second write starts while
// it hangs (a late write must not land after a newer one); once it returns
// it takes effect, and the next Extend passes the check again.
func TestFenceKeeperHungWrite(t *testing.T) {
	start := time.UnixMilli(1_750_000_000_000)
	clk := clocktest.NewFake(start)
	g := health.New(zerolog.Nop(), nil)
	gen := &fakeGen{}
	release := make(chan struct{})
	var writes atomic.Int64
	var hang atomic.Bool
	persist := func(fence snowflake.UnixMilli) (snowflake.UnixMilli, error) {
		writes.Add(1)
		if hang.Load() {
			<-release
		}
		return fence, nil
	}
	const ahead = 300 * time.Millisecond // write deadline: 100ms
	k := NewKeeper(g, clk, gen, ahead, 0, persist, zerolog.Nop())
	if err := k.Extend(context.Background()); err != nil || !g.Ready() {
		t.Fatalf("first write: %v, ready %v", err, g.Ready())
	}
	good := k.Persisted()

	hang.Store(true)
	clk.Advance(time.Second)
	began := time.Now()
	err := k.Extend(context.Background())
	if err == nil || !strings.Contains(err.Error(), "did not finish within 100ms") {
		t.Fatalf("hung write: %v, want a deadline error", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("Extend took %v with a 100ms deadline", took)
	}
	if g.Ready() || g.Status().Reason != health.ReasonFencePersist {
		t.Fatalf("after a hung write: %+v, want out with fence_persist_failed", g.Status())
	}
	if k.Persisted() != good || gen.get() != good {
		t.Fatalf("persisted %d, generator %d: want the last good fence %d", k.Persisted(), gen.get(), good)
	}
	if err := k.Extend(context.Background()); !errors.Is(err, errWriteInFlight) || writes.Load() != 2 {
		t.Fatalf("second Extend while the first hangs: %v after %d writes, want ErrWriteInFlight and no new write", err, writes.Load())
	}

	hung := start.Add(time.Second).UnixMilli() + ahead.Milliseconds()
	hang.Store(false)
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for k.Persisted() != snowflake.UnixMilli(hung) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if k.Persisted() != snowflake.UnixMilli(hung) || gen.get() != snowflake.UnixMilli(hung) {
		t.Fatalf("after the hung write returned: persisted %d, generator %d, want %d", k.Persisted(), gen.get(), hung)
	}
	if err := k.Extend(context.Background()); err != nil || !g.Ready() {
		t.Fatalf("next write: %v, ready %v (%+v)", err, g.Ready(), g.Status())
	}
}

// A stop cancels Run while its write is still on the disk: PersistFinal
// waits for that write and then lowers the fence, instead of failing with
// errWriteInFlight and leaving the fence ahead (an unclean stop). A write
// that outlasts the final write's deadline still fails it.
func TestFenceKeeperPersistFinalWaitsForWriteInFlight(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release time.Duration // when the slow write returns
		wantErr bool
	}{
		{"slow write returns within the final deadline", 50 * time.Millisecond, false},
		{"write hangs past the final deadline", 2 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			release := make(chan struct{})
			var slow atomic.Bool
			var mu sync.Mutex
			var written []snowflake.UnixMilli
			persist := func(fence snowflake.UnixMilli) (snowflake.UnixMilli, error) {
				if slow.Load() {
					<-release
				}
				mu.Lock()
				written = append(written, fence)
				mu.Unlock()
				return fence, nil
			}
			k := NewKeeper(health.New(zerolog.Nop(), nil), clk, &fakeGen{}, 3*time.Second, 0, persist, zerolog.Nop())
			if err := k.Extend(context.Background()); err != nil {
				t.Fatal(err)
			}
			slow.Store(true)
			ctx, cancel := context.WithCancel(context.Background())
			extended := make(chan error, 1)
			go func() { extended <- k.Extend(ctx) }()
			for i := 0; ; i++ { // the slow write has started
				k.mu.Lock()
				busy := k.inFlight
				k.mu.Unlock()
				if busy {
					break
				}
				if i == 1000 {
					t.Fatal("the second write never started")
				}
				time.Sleep(time.Millisecond)
			}
			cancel()
			if err := <-extended; err == nil {
				t.Fatal("Extend returned nil after its context was cancelled")
			}
			slow.Store(false)
			time.AfterFunc(tc.release, func() { close(release) })
			last := clk.WallNanos()/1e6 - 5
			err := k.PersistFinal(context.Background(), snowflake.UnixMilli(last), 500*time.Millisecond)
			if (err != nil) != tc.wantErr {
				t.Fatalf("PersistFinal: %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && k.Persisted() != snowflake.UnixMilli(last) {
				t.Fatalf("persisted %d, want the final fence %d", k.Persisted(), last)
			}
			if tc.wantErr && !errors.Is(err, errWriteInFlight) {
				t.Fatalf("PersistFinal: %v, want ErrWriteInFlight", err)
			}
		})
	}
}

// The final write keeps its deadline in every interleaving: when the write
// in flight finishes at the very instant the deadline passes (the select
// may take either), and the final write then hangs, PersistFinal still
// returns at the deadline. Each round is a coin toss for a keeper that
// waits on a timer it may already have drained; 100 rounds.
func TestFenceKeeperFinalWriteKeepsItsDeadline(t *testing.T) {
	const timeout = 100 * time.Millisecond
	for round := range 100 {
		synctest.Test(t, func(t *testing.T) {
			clk := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			hang := make(chan struct{})
			defer close(hang)
			persist := func(fence snowflake.UnixMilli) (snowflake.UnixMilli, error) {
				<-hang // the final write: a disk that stalls again
				return fence, nil
			}
			k := NewKeeper(health.New(zerolog.Nop(), nil), clk, &fakeGen{}, 3*time.Second, 0, persist, zerolog.Nop())
			// A write in flight that returns exactly at the final deadline.
			earlier := make(chan struct{})
			k.mu.Lock()
			k.inFlight, k.idle = true, earlier
			k.mu.Unlock()
			time.AfterFunc(timeout, func() {
				k.mu.Lock()
				k.inFlight = false
				close(earlier)
				k.mu.Unlock()
			})
			start := time.Now()
			_ = k.PersistFinal(context.Background(), 1_750_000_000_000, timeout)
			if took := time.Since(start); took > timeout {
				t.Fatalf("round %d: PersistFinal returned after %v, past its %v deadline", round, took, timeout)
			}
		})
	}
}
