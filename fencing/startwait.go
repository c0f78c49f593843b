package fencing

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
)

// startPoll is how often a node whose clock is behind its fence looks again.
const startPoll = 100 * time.Millisecond

// StartWait is the clock_behind_fence check: at start the clock
// must be past the fence the previous run left. Slightly behind (at most
// max-start-wait) it waits with the check pending; further behind, the clock
// went back while the node was down, and the check fails with the figures
// until the clock passes the fence. Either way it then passes for good.
type StartWait struct {
	check   *clockguard.Check
	clock   clock.Clock
	readyNs int64 // Unix ns from which IDs may be issued
	maxWait time.Duration
	log     zerolog.Logger
}

// NewStartWait registers the clock_behind_fence check. readyAtNs is the
// first Unix-nanosecond instant past the fence (the start of the tick after
// the fence's tick; 0 when there is no fence).
func NewStartWait(g *clockguard.Guard, c clock.Clock, readyAtNs int64, maxWait time.Duration, log zerolog.Logger) *StartWait {
	return &StartWait{check: g.Check(clockguard.ReasonClockBehindFence), clock: c, readyNs: readyAtNs, maxWait: maxWait, log: log}
}

// Behind returns how far the clock is behind the fence (0 when past it).
func (s *StartWait) Behind() time.Duration {
	return max(0, time.Duration(s.readyNs-s.clock.WallNanos()))
}

// Run polls until the clock is past the fence and passes the check, or ctx
// ends. It returns how long it waited (by the monotonic clock).
func (s *StartWait) Run(ctx context.Context) time.Duration {
	start := s.clock.Mono()
	behind := s.Behind()
	if behind == 0 {
		s.check.Pass()
		return 0
	}
	failing := behind > s.maxWait
	if failing {
		detail := fmt.Sprintf("clock is %s behind the fence %s (max-start-wait %s): it went back while the node was down; out of service until it passes the fence",
			behind.Round(time.Millisecond), time.Unix(0, s.readyNs).UTC().Format(time.RFC3339Nano), s.maxWait)
		s.log.Warn().Dur("behind", behind).Dur("max_start_wait", s.maxWait).Msg(detail)
		s.check.Fail(detail)
	} else {
		s.log.Info().Dur("behind", behind).Dur("max_start_wait", s.maxWait).Msg("clock is behind the fence: waiting for it before serving")
	}
	t := time.NewTimer(min(behind, startPoll))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return s.clock.Mono() - start
		case <-t.C:
		}
		behind = s.Behind()
		if behind == 0 {
			waited := s.clock.Mono() - start
			s.log.Info().Dur("waited", waited).Msg("clock passed the fence")
			s.check.Pass()
			return waited
		}
		if !failing && behind > s.maxWait { // the clock went back during the wait
			failing = true
			s.check.Fail(fmt.Sprintf("clock is %s behind the fence (max-start-wait %s)", behind.Round(time.Millisecond), s.maxWait))
		}
		t.Reset(min(behind, startPoll))
	}
}
