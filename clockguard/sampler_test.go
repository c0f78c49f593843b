package clockguard

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
)

// A reading keeps the tightest bracket of at most maxSampleTries: its
// monotonic time is the bracket's midpoint, monoAfter its end. Calls 1–3
// are the first try (Mono, WallNanos, Mono), 4–6 the second, and so on.
func TestReadSample(t *testing.T) {
	tests := []struct {
		name   string
		delays map[int]time.Duration
		want   Sample
	}{
		{"not held up", nil, Sample{Wall: t0.UnixNano()}},
		{"held up within maxSampleGap", map[int]time.Duration{3: 600 * time.Microsecond},
			Sample{Wall: t0.UnixNano(), Mono: 300 * time.Microsecond, Gap: 600 * time.Microsecond}},
		{"held up once beyond it: retried", map[int]time.Duration{3: 4 * time.Millisecond},
			Sample{Wall: t0.UnixNano() + int64(4*time.Millisecond), Mono: 4 * time.Millisecond}},
		{"held up every try: the tightest", map[int]time.Duration{3: 4 * time.Millisecond, 6: 2 * time.Millisecond, 9: 3 * time.Millisecond},
			Sample{Wall: t0.UnixNano() + int64(4*time.Millisecond), Mono: 5 * time.Millisecond, Gap: 2 * time.Millisecond}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &heldUpClock{delays: tc.delays}
			got := readSample(c)
			if got != tc.want {
				t.Fatalf("readSample = %+v, want %+v", got, tc.want)
			}
			if end := got.Mono - got.Gap/2 + got.Gap; got.monoAfter() != end {
				t.Fatalf("monoAfter = %v, want the bracket's end %v", got.monoAfter(), end)
			}
		})
	}
}

// feedRecorder records, in order, which consumer got which reading.
type feedRecorder struct {
	mu  sync.Mutex
	got []fed
}

type fed struct {
	consumer string
	s        Sample
}

func (r *feedRecorder) consumer(name string) func(Sample) {
	return func(s Sample) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, fed{name, s})
	}
}

func (r *feedRecorder) snapshot() []fed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// One reading per tick (and one at once) goes to every consumer, in order:
// the watcher and the jump guard judge the same reading.
func TestSamplerFeedsEveryConsumer(t *testing.T) {
	fc := clocktest.NewFake(t0)
	rec := &feedRecorder{}
	s := newSampler(fc, 0, rec.consumer("a"), rec.consumer("b"))
	if s.interval != defaultWatchInterval {
		t.Fatalf("interval %v, want the default %v", s.interval, defaultWatchInterval)
	}
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runTicks(ctx, ticks)
	}()
	steps := []struct {
		name string
		do   func()
		want Sample
	}{
		{"at once", func() {}, Sample{Wall: t0.UnixNano()}},
		{"a tick", func() { fc.Advance(20 * time.Millisecond) }, Sample{Wall: t0.Add(20 * time.Millisecond).UnixNano(), Mono: 20 * time.Millisecond}},
		{"a step back", func() { fc.Advance(20 * time.Millisecond); fc.StepWall(-time.Second) },
			Sample{Wall: t0.Add(40*time.Millisecond - time.Second).UnixNano(), Mono: 40 * time.Millisecond}},
	}
	for i, st := range steps {
		st.do()
		if i > 0 {
			select {
			case ticks <- time.Time{}:
			case <-time.After(waitTimeout):
				t.Fatalf("%s: the sampler did not take the tick", st.name)
			}
		}
		want := 2 * (i + 1)
		waitFor(t, st.name+": both consumers fed", func() bool { return len(rec.snapshot()) == want })
		got := rec.snapshot()
		if got[want-2] != (fed{"a", st.want}) || got[want-1] != (fed{"b", st.want}) {
			t.Fatalf("%s: fed %+v, want %+v to a, then b", st.name, got[want-2:], st.want)
		}
	}
	close(ticks)
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("RunTicks did not return once its ticks were closed")
	}
	if n := len(rec.snapshot()); n != 2*len(steps) {
		t.Fatalf("%d readings fed, want %d", n, 2*len(steps))
	}
}

// Run drives itself with a ticker until its context ends.
func TestSamplerRun(t *testing.T) {
	fc := clocktest.NewFake(t0)
	rec := &feedRecorder{}
	s := newSampler(fc, time.Millisecond, rec.consumer("a"))
	stop := runInBackground(t, s.Run)
	waitFor(t, "a few ticks", func() bool { return len(rec.snapshot()) >= 3 })
	stop()
}
