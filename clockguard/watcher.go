package clockguard

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// Watcher defaults.
const (
	defaultWatchInterval     = 20 * time.Millisecond
	defaultRollbackTolerance = 5 * time.Millisecond // snowflake.DefaultRollbackTolerance (a test keeps them equal)
	defaultForwardThreshold  = time.Second
)

// maxSampleTries bounds how often one sample is retried when the goroutine was
// held up between its clock readings.
const maxSampleTries = 3

// maxSampleGap is the widest monotonic gap between the readings of one sample
// that is accepted without a retry.
const maxSampleGap = time.Millisecond

// errBadConfig is wrapped by every constructor error caused by invalid
// configuration.
var errBadConfig = errors.New("clockguard: invalid configuration")

// WatcherConfig configures a Watcher. Zero durations take the defaults.
type WatcherConfig struct {
	// Interval between two comparisons (default 20ms).
	Interval time.Duration
	// Tolerance is the largest backward step that is ignored (the
	// --rollback-tolerance, default 5ms); the generator waits those out.
	Tolerance time.Duration
	// ForwardThreshold is the smallest forward step that is logged and
	// counted (default 1s).
	ForwardThreshold time.Duration
	// OnRollback is called, on the goroutine that feeds the watcher, with
	// the size of every backward step larger than Tolerance and the wall
	// reading that found it (at+step is where the clock would read without
	// the step). The node wires it to Rollback.Trip(step, "watcher") and the
	// metrics. It must not block. Required.
	OnRollback func(step time.Duration, at time.Time)
	// Log receives one line per detected step.
	Log zerolog.Logger
}

// WatcherStats are the watcher's counters, for /clock and metrics.
type WatcherStats struct {
	Checks          int64         `json:"checks"`                   // comparisons made
	BackwardSteps   int64         `json:"backward_steps"`           // steps back beyond the tolerance
	ForwardSteps    int64         `json:"forward_steps"`            // steps forward beyond the threshold
	LargestBackward time.Duration `json:"largest_backward_step_ns"` // largest backward step seen
	LargestForward  time.Duration `json:"largest_forward_step_ns"`  // largest forward step seen
	LastStep        time.Duration `json:"last_step_ns"`             // the last detected step (negative: back)
	LastStepAt      time.Time     `json:"last_step_at,omitzero"`    // wall time of the last detected step
}

// stepKind classifies one comparison.
type stepKind int

// Outcomes of a comparison.
const (
	noStep       stepKind = iota // within the tolerance and the threshold (or the first sample)
	backwardStep                 // the wall clock went back by more than the tolerance
	forwardStep                  // the wall clock jumped forward by more than the threshold
)

// String names the kind for logs.
func (k stepKind) String() string {
	switch k {
	case noStep:
		return "none"
	case backwardStep:
		return "backward"
	case forwardStep:
		return "forward"
	}
	return "unknown"
}

// Step is the result of one comparison.
type Step struct {
	Kind stepKind
	// Skew is wall elapsed − monotonic elapsed since the previous sample:
	// negative when the wall clock was stepped back.
	Skew time.Duration
	// WallElapsed and MonoElapsed are the two elapsed times compared.
	WallElapsed, MonoElapsed time.Duration
}

// Watcher compares wall and monotonic elapsed time at a fixed interval so
// that a step of the wall clock is seen even when no ID is requested.
type Watcher struct {
	clk clock.Clock
	cfg WatcherConfig

	mu    sync.Mutex
	prev  Sample
	have  bool
	stats WatcherStats
}

// NewWatcher returns a watcher of c. It fails on a nil clock, a missing
// OnRollback or negative durations.
func NewWatcher(c clock.Clock, cfg WatcherConfig) (*Watcher, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: watcher: nil clock", errBadConfig)
	}
	if cfg.OnRollback == nil {
		return nil, fmt.Errorf("%w: watcher: OnRollback is required", errBadConfig)
	}
	if cfg.Interval < 0 || cfg.Tolerance < 0 || cfg.ForwardThreshold < 0 {
		return nil, fmt.Errorf("%w: watcher: negative duration (interval %v, tolerance %v, forward threshold %v)",
			errBadConfig, cfg.Interval, cfg.Tolerance, cfg.ForwardThreshold)
	}
	if cfg.Interval == 0 {
		cfg.Interval = defaultWatchInterval
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = defaultRollbackTolerance
	}
	if cfg.ForwardThreshold == 0 {
		cfg.ForwardThreshold = defaultForwardThreshold
	}
	return &Watcher{clk: c, cfg: cfg}, nil
}

// Interval is how often Run compares the clocks.
func (w *Watcher) Interval() time.Duration { return w.cfg.Interval }

// Run compares the clocks every Interval until ctx ends. A node that has
// other consumers of the same readings runs a Sampler feeding Observe
// instead.
func (w *Watcher) Run(ctx context.Context) { w.sampler().Run(ctx) }

// runTicks compares the clocks once at once and then once per value received
// from ticks, until ctx ends or ticks is closed. Tests drive it with their
// own channel; Run drives it with a ticker.
func (w *Watcher) runTicks(ctx context.Context, ticks <-chan time.Time) {
	w.sampler().runTicks(ctx, ticks)
}

// sampler returns a sampler that feeds the watcher alone.
func (w *Watcher) sampler() *Sampler {
	return newSampler(w.clk, w.cfg.Interval, func(s Sample) { w.Observe(s) })
}

// Step takes one sample and compares it with the previous one (Observe).
func (w *Watcher) Step() Step { return w.Observe(readSample(w.clk)) }

// Observe compares a sample with the previous one. A backward step beyond
// the tolerance calls OnRollback; a forward step beyond the threshold is
// logged and counted. The first call only records the sample. Samples must
// come in the order they were read (one goroutine feeds them).
func (w *Watcher) Observe(s Sample) Step {
	w.mu.Lock()
	prev, had := w.prev, w.have
	w.prev, w.have = s, true
	if !had {
		w.mu.Unlock()
		return Step{}
	}
	st := Step{WallElapsed: time.Duration(s.Wall - prev.Wall), MonoElapsed: s.Mono - prev.Mono}
	st.Skew = st.WallElapsed - st.MonoElapsed
	// The midpoints are uncertain by half of each bracket.
	slack := (s.Gap + prev.Gap) / 2
	switch {
	case -st.Skew > w.cfg.Tolerance+slack:
		st.Kind = backwardStep
	case st.Skew > w.cfg.ForwardThreshold+slack:
		st.Kind = forwardStep
	}
	w.stats.Checks++
	if st.Kind != noStep {
		size := st.Skew
		if st.Kind == backwardStep {
			size = -size
			w.stats.BackwardSteps++
			w.stats.LargestBackward = max(w.stats.LargestBackward, size)
		} else {
			w.stats.ForwardSteps++
			w.stats.LargestForward = max(w.stats.LargestForward, size)
		}
		w.stats.LastStep = st.Skew
		w.stats.LastStepAt = time.Unix(0, s.Wall)
	}
	stats := w.stats
	w.mu.Unlock()

	switch st.Kind {
	case backwardStep:
		w.cfg.Log.Warn().Str("direction", "backward").Dur("step_ms", -st.Skew).
			Dur("wall_elapsed_ms", st.WallElapsed).Dur("mono_elapsed_ms", st.MonoElapsed).
			Dur("tolerance_ms", w.cfg.Tolerance).Int64("backward_steps", stats.BackwardSteps).
			Msg("wall clock stepped back")
		w.cfg.OnRollback(-st.Skew, time.Unix(0, s.Wall))
	case forwardStep:
		w.cfg.Log.Warn().Str("direction", "forward").Dur("step_ms", st.Skew).
			Dur("wall_elapsed_ms", st.WallElapsed).Dur("mono_elapsed_ms", st.MonoElapsed).
			Dur("threshold_ms", w.cfg.ForwardThreshold).Int64("forward_steps", stats.ForwardSteps).
			Msg("wall clock stepped forward")
	}
	return st
}

// bracket reads the wall clock between two monotonic readings, retrying a
// bounded number of times when the goroutine was held up in between, and
// returns the tightest bracket: its first monotonic reading, the wall
// reading and its width (the reading's uncertainty).
func bracket(c clock.Clock) (mono time.Duration, wall int64, gap time.Duration) {
	for i := 0; i < maxSampleTries; i++ {
		m0 := c.Mono()
		w := c.WallNanos()
		m1 := c.Mono()
		if i == 0 || m1-m0 < gap {
			mono, wall, gap = m0, w, m1-m0
		}
		if gap <= maxSampleGap {
			break
		}
	}
	return mono, wall, gap
}

// Stats returns the counters.
func (w *Watcher) Stats() WatcherStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}
