package clockguard

import (
	"context"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// Sample is one reading of the wall clock between two monotonic readings.
type Sample struct {
	Wall int64         // unix ns
	Mono time.Duration // midpoint of the monotonic readings around Wall
	Gap  time.Duration // width of the monotonic bracket: the reading's uncertainty
}

// monoAfter returns the monotonic reading taken after Wall (the bracket's
// end): no earlier than the wall reading.
func (s Sample) monoAfter() time.Duration { return s.Mono - s.Gap/2 + s.Gap }

// readSample reads both clocks: the wall clock between two monotonic
// readings, retried a bounded number of times when the goroutine was held
// up in between, the tightest bracket kept.
func readSample(c clock.Clock) Sample {
	m0, wall, gap := bracket(c)
	return Sample{Wall: wall, Mono: m0 + gap/2, Gap: gap}
}

// Sampler reads the clocks once per tick and hands the one reading to each
// consumer in turn: the node's watcher (clock_rollback) and its jump guard
// (clock_jump) share it, and one loop.
type Sampler struct {
	clk      clock.Clock
	interval time.Duration
	feed     []func(Sample)
}

// newSampler returns a sampler of c that reads every interval (0 means
// defaultWatchInterval) and feeds each reading to every consumer, in order,
// on its goroutine. Consumers must be quick and must not block.
func newSampler(c clock.Clock, interval time.Duration, feed ...func(Sample)) *Sampler {
	if interval <= 0 {
		interval = defaultWatchInterval
	}
	return &Sampler{clk: c, interval: interval, feed: feed}
}

// Sample reads the clocks once and feeds the reading to every consumer.
func (s *Sampler) Sample() {
	r := readSample(s.clk)
	for _, f := range s.feed {
		f(r)
	}
}

// Run samples every interval until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	t := clock.NewTicker(ctx, s.interval)
	defer t.Stop()
	s.runTicks(ctx, t.C)
}

// runTicks samples once at once and then once per value received from
// ticks, until ctx ends or ticks is closed. Tests drive it with their own
// channel; Run drives it with a ticker.
func (s *Sampler) runTicks(ctx context.Context, ticks <-chan time.Time) {
	s.Sample()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ticks:
			if !ok || ctx.Err() != nil { // an end that came with it wins (select picks at random)
				return
			}
			s.Sample()
		}
	}
}
