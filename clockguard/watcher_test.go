package clockguard

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// rollbackRecorder records the steps and readings passed to OnRollback.
type rollbackRecorder struct {
	mu    sync.Mutex
	steps []time.Duration
	ats   []time.Time
}

func (r *rollbackRecorder) record(d time.Duration, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, d)
	r.ats = append(r.ats, at)
}

func (r *rollbackRecorder) readings() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.ats...)
}

func (r *rollbackRecorder) got() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.steps...)
}

func newTestWatcher(t *testing.T, c clock.Clock, rec *rollbackRecorder, log zerolog.Logger) *Watcher {
	t.Helper()
	w, err := NewWatcher(c, WatcherConfig{OnRollback: rec.record, Log: log})
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	return w
}

func TestWatcherStepDetection(t *testing.T) {
	for _, tc := range []struct {
		name     string
		advance  time.Duration // real time passing (both clocks)
		stepWall time.Duration // wall-only step
		wantKind stepKind
		wantSkew time.Duration
	}{
		{"time passes", 20 * time.Millisecond, 0, noStep, 0},
		{"back within tolerance", 20 * time.Millisecond, -4 * time.Millisecond, noStep, -4 * time.Millisecond},
		{"back exactly the tolerance", 20 * time.Millisecond, -5 * time.Millisecond, noStep, -5 * time.Millisecond},
		{"back just beyond tolerance", 20 * time.Millisecond, -6 * time.Millisecond, backwardStep, -6 * time.Millisecond},
		{"back 2s", 20 * time.Millisecond, -2 * time.Second, backwardStep, -2 * time.Second},
		{"back 2s with no time passing", 0, -2 * time.Second, backwardStep, -2 * time.Second},
		{"forward below threshold", 20 * time.Millisecond, 900 * time.Millisecond, noStep, 900 * time.Millisecond},
		{"forward 3s", 20 * time.Millisecond, 3 * time.Second, forwardStep, 3 * time.Second},
		{"long pause, no step", time.Hour, 0, noStep, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clocktest.NewFake(t0)
			rec := &rollbackRecorder{}
			w := newTestWatcher(t, fc, rec, testLogger(t))
			if st := w.Step(); st.Kind != noStep {
				t.Fatalf("first Step = %+v, want NoStep", st)
			}
			fc.Advance(tc.advance)
			fc.StepWall(tc.stepWall)
			st := w.Step()
			if st.Kind != tc.wantKind || st.Skew != tc.wantSkew {
				t.Fatalf("Step = %v skew %v, want %v skew %v", st.Kind, st.Skew, tc.wantKind, tc.wantSkew)
			}
			if st.MonoElapsed != tc.advance || st.WallElapsed != tc.advance+tc.stepWall {
				t.Fatalf("elapsed wall %v mono %v, want wall %v mono %v",
					st.WallElapsed, st.MonoElapsed, tc.advance+tc.stepWall, tc.advance)
			}
			var want []time.Duration
			if tc.wantKind == backwardStep {
				want = []time.Duration{-tc.stepWall}
			}
			if got := rec.got(); !equalDurations(got, want) {
				t.Fatalf("OnRollback calls = %v, want %v", got, want)
			}
			// The reading passed is the one that found the step, not a
			// later one: the clock may be set right in between.
			wantAt := time.Unix(0, fc.WallNanos())
			for _, at := range rec.readings() {
				if !at.Equal(wantAt) {
					t.Fatalf("OnRollback reading %v, want %v (the reading after the step)", at, wantAt)
				}
			}
			s := w.Stats()
			if s.Checks != 1 {
				t.Fatalf("Checks = %d, want 1", s.Checks)
			}
			if (s.BackwardSteps == 1) != (tc.wantKind == backwardStep) || (s.ForwardSteps == 1) != (tc.wantKind == forwardStep) {
				t.Fatalf("stats %+v do not match kind %v", s, tc.wantKind)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWatcherCountersAndLog runs a sequence of steps and checks the counters
// and the one log line per step with its figures.
func TestWatcherCountersAndLog(t *testing.T) {
	fc := clocktest.NewFake(t0)
	rec := &rollbackRecorder{}
	var logs testsupport.SyncBuffer
	w := newTestWatcher(t, fc, rec, zerolog.New(&logs))
	w.Step()
	for _, step := range []time.Duration{
		-2 * time.Second, 0, 3 * time.Second, -700 * time.Millisecond, 1500 * time.Millisecond, 2 * time.Millisecond,
	} {
		fc.Advance(20 * time.Millisecond)
		fc.StepWall(step)
		w.Step()
	}
	want := WatcherStats{
		Checks: 6, BackwardSteps: 2, ForwardSteps: 2,
		LargestBackward: 2 * time.Second, LargestForward: 3 * time.Second,
		LastStep:   1500 * time.Millisecond,
		LastStepAt: time.Unix(0, t0.Add(5*20*time.Millisecond+(-2*time.Second+3*time.Second-700*time.Millisecond+1500*time.Millisecond)).UnixNano()),
	}
	if got := w.Stats(); got != want {
		t.Fatalf("Stats = %+v\nwant    %+v", got, want)
	}
	if got := rec.got(); !equalDurations(got, []time.Duration{2 * time.Second, 700 * time.Millisecond}) {
		t.Fatalf("OnRollback calls = %v, want [2s 700ms]", got)
	}
	back := logs.Lines(t, "wall clock stepped back")
	fwd := logs.Lines(t, "wall clock stepped forward")
	if len(back) != 2 || len(fwd) != 2 {
		t.Fatalf("log lines: %d back, %d forward, want 2 and 2", len(back), len(fwd))
	}
	// zerolog writes durations as float milliseconds.
	for _, tc := range []struct {
		line      map[string]any
		step, cnt float64
		dir       string
	}{
		{back[0], 2000, 1, "backward"},
		{back[1], 700, 2, "backward"},
		{fwd[0], 3000, 1, "forward"},
		{fwd[1], 1500, 2, "forward"},
	} {
		cntKey := tc.dir + "_steps"
		if tc.line["step_ms"] != tc.step || tc.line["direction"] != tc.dir || tc.line[cntKey] != tc.cnt ||
			tc.line["mono_elapsed_ms"] != 20.0 || tc.line["level"] != "warn" {
			t.Errorf("log line %v: want step_ms %v, direction %s, %s %v, mono_elapsed_ms 20, level warn",
				tc.line, tc.step, tc.dir, cntKey, tc.cnt)
		}
	}
}

// heldUpClock simulates a goroutine held up between clock readings: every
// call moves true time by the delay scripted for that call number.
type heldUpClock struct {
	mu     sync.Mutex
	now    time.Duration
	calls  int
	delays map[int]time.Duration
}

func (c *heldUpClock) tick() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.now += c.delays[c.calls]
	return c.now
}

func (c *heldUpClock) WallNanos() int64    { return t0.UnixNano() + int64(c.tick()) }
func (c *heldUpClock) Mono() time.Duration { return c.tick() }

func (c *heldUpClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now += d
}

// TestWatcherHeldUpBetweenReadings: a goroutine held up between its wall and
// monotonic readings is not a clock step. Calls 1–3 are the first sample;
// the second sample reads Mono (4), WallNanos (5), Mono (6), and so on.
func TestWatcherHeldUpBetweenReadings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delays map[int]time.Duration
	}{
		{"held up after the wall reading, once", map[int]time.Duration{6: 12 * time.Millisecond}},
		{"held up before the wall reading, once", map[int]time.Duration{5: 12 * time.Millisecond}},
		{"held up after the wall reading, every try", map[int]time.Duration{6: 12 * time.Millisecond, 9: 12 * time.Millisecond, 12: 12 * time.Millisecond}},
		{"held up before the wall reading, every try", map[int]time.Duration{5: 12 * time.Millisecond, 8: 12 * time.Millisecond, 11: 12 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &heldUpClock{delays: tc.delays}
			rec := &rollbackRecorder{}
			w := newTestWatcher(t, c, rec, testLogger(t))
			w.Step()
			c.advance(20 * time.Millisecond)
			if st := w.Step(); st.Kind != noStep {
				t.Fatalf("Step = %+v, want NoStep", st)
			}
			if got := rec.got(); len(got) != 0 {
				t.Fatalf("OnRollback called with %v", got)
			}
		})
	}
}

func TestWatcherRunTicksWiredToRollback(t *testing.T) {
	fc := clocktest.NewFake(t0)
	g := newGuard(t)
	b := &fakeBehinder{behind: 2 * time.Second}
	rb := NewRollback(g, b, time.Millisecond)
	w, err := NewWatcher(fc, WatcherConfig{
		OnRollback: func(step time.Duration, _ time.Time) { rb.Trip(step, "watcher") },
		Log:        testLogger(t),
	})
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	ticks := make(chan time.Time)
	stop := runInBackground(t, func(ctx context.Context) { w.runTicks(ctx, ticks) })
	tick := func() {
		t.Helper()
		select {
		case ticks <- time.Time{}:
		case <-time.After(waitTimeout):
			t.Fatal("watcher did not take a tick")
		}
	}
	tick()
	waitFor(t, "the first comparison", func() bool { return w.Stats().Checks == 1 })
	fc.Advance(20 * time.Millisecond)
	fc.StepWall(-2 * time.Second)
	tick()
	waitFor(t, "the rollback check to trip", rb.tripped)
	if g.Ready() {
		t.Fatalf("guard still ready after a 2s step back: %+v", g.Status())
	}
	if d, _ := failingDetail(g, health.ReasonClockRollback); d != "watcher: clock 2s behind the last issued ID" {
		t.Fatalf("detail = %q", d)
	}
	if s := w.Stats(); s.BackwardSteps != 1 || s.LargestBackward != 2*time.Second || s.Checks != 2 {
		t.Fatalf("Stats = %+v, want 1 backward step of 2s in 2 checks", s)
	}
	stop()
}

// TestWatcherRunWithTicker: Run drives itself with a real ticker.
func TestWatcherRunWithTicker(t *testing.T) {
	fc := clocktest.NewFake(t0)
	rec := &rollbackRecorder{}
	w, err := NewWatcher(fc, WatcherConfig{Interval: time.Millisecond, OnRollback: rec.record, Log: testLogger(t)})
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	stop := runInBackground(t, w.Run)
	waitFor(t, "the watcher to run", func() bool { return w.Stats().Checks > 0 })
	fc.StepWall(-time.Second)
	waitFor(t, "the step to be seen", func() bool { return len(rec.got()) > 0 })
	if got := rec.got(); !equalDurations(got, []time.Duration{time.Second}) {
		t.Fatalf("OnRollback calls = %v, want [1s]", got)
	}
	stop()
}

func TestNewWatcherConfigErrors(t *testing.T) {
	fc := clocktest.NewFake(t0)
	cb := func(time.Duration, time.Time) {}
	for _, tc := range []struct {
		name string
		c    clock.Clock
		cfg  WatcherConfig
	}{
		{"nil clock", nil, WatcherConfig{OnRollback: cb}},
		{"no callback", fc, WatcherConfig{}},
		{"negative interval", fc, WatcherConfig{OnRollback: cb, Interval: -time.Millisecond}},
		{"negative tolerance", fc, WatcherConfig{OnRollback: cb, Tolerance: -time.Millisecond}},
		{"negative threshold", fc, WatcherConfig{OnRollback: cb, ForwardThreshold: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWatcher(tc.c, tc.cfg)
			if !errors.Is(err, errBadConfig) || w != nil {
				t.Fatalf("NewWatcher = %v, %v; want nil, ErrBadConfig", w, err)
			}
		})
	}
}

func TestWatcherDefaults(t *testing.T) {
	w, err := NewWatcher(clocktest.NewFake(t0), WatcherConfig{OnRollback: func(time.Duration, time.Time) {}})
	if err != nil {
		t.Fatalf("NewWatcher: %v", err)
	}
	if w.cfg.Interval != defaultWatchInterval || w.cfg.Tolerance != defaultRollbackTolerance ||
		w.cfg.ForwardThreshold != defaultForwardThreshold {
		t.Fatalf("defaults not applied: %+v", w.cfg)
	}
}

// The watcher's default rollback tolerance is the generator's: clockguard
// keeps its own copy so that it does not link the ID library.
func TestDefaultRollbackToleranceIsTheGenerators(t *testing.T) {
	if defaultRollbackTolerance != snowflake.DefaultRollbackTolerance {
		t.Fatalf("clockguard's default rollback tolerance %v, the generator's %v", defaultRollbackTolerance, snowflake.DefaultRollbackTolerance)
	}
}
