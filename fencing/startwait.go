package fencing

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// startPoll is how often a node whose clock is behind its fence looks again.
const startPoll = 100 * time.Millisecond

// StartWait is the clock_behind_fence check: at start the clock
// must be past the fence the previous run left. Slightly behind (at most
// max-start-wait) it waits with the check pending; further behind, the clock
// went back while the node was down, and the check fails with the figures
// until the clock passes the fence. Either way it then passes for good.
//
// When the fence is the previous holder's ZooKeeper fence (NewPrevHolderWait:
// a fence this node's disk did not write, so it says nothing about this
// clock), the wait is part of a normal start: the node stays starting with
// reason prev_holder_fence and the holder, fence and time left as the
// detail, for as long as a correct clock can need (--zk-fence-ahead +
// max-start-wait). Only a wait beyond that is a clock's fault
// (clock_behind_fence): this clock is behind, or the holder's was ahead.
type StartWait struct {
	check   *health.Check
	prev    *health.Check // prev_holder_fence; nil for a fence of this node's own
	holder  PrevHolder
	clock   clock.Clock
	readyAt time.Time // the wall instant from which IDs may be issued
	maxWait time.Duration
	log     zerolog.Logger
}

// PrevHolder is the previous holder of a worker ID, whose ZooKeeper fence a
// node waits for at start.
type PrevHolder struct {
	NodeKey string              // its node key ("" when unknown)
	Addr    string              // its advertised address ("" when unknown)
	Token   string              // its instance token ("" for a holder from before tokens)
	Fence   snowflake.UnixMilli // its ZooKeeper fence
	// ZKFenceAhead is --zk-fence-ahead: how far ahead of its clock a
	// holder's fence can be (0 for a holder that stopped cleanly, whose
	// fence is the time of its last ID).
	ZKFenceAhead time.Duration
}

// String names the holder for details and logs.
func (h PrevHolder) String() string {
	s := "node key " + orUnknown(h.NodeKey)
	if h.Addr != "" {
		s += " at " + h.Addr
	}
	if h.Token != "" {
		s += ", token " + h.Token
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return fmt.Sprintf("%q", s)
}

// NewStartWait registers the clock_behind_fence check. readyAt is the first
// instant past the fence (the start of the tick after the fence's tick; the
// Unix epoch or the zero time when there is no fence).
func NewStartWait(g *health.Guard, c clock.Clock, readyAt time.Time, maxWait time.Duration, log zerolog.Logger) *StartWait {
	return &StartWait{check: g.Check(health.ReasonClockBehindFence), clock: c, readyAt: readyAt, maxWait: maxWait, log: log}
}

// NewPrevHolderWait is NewStartWait for a start fence that is the previous
// holder's ZooKeeper fence: it registers prev_holder_fence first, then
// clock_behind_fence.
func NewPrevHolderWait(g *health.Guard, c clock.Clock, readyAt time.Time, maxWait time.Duration, holder PrevHolder, log zerolog.Logger) *StartWait {
	prev := g.Check(health.ReasonPrevHolderFence)
	s := NewStartWait(g, c, readyAt, maxWait, log)
	s.prev, s.holder = prev, holder
	return s
}

// Behind returns how far the clock is behind the fence (0 when past it).
func (s *StartWait) Behind() time.Duration {
	return max(0, s.readyAt.Sub(clock.WallTime(s.clock)))
}

// PrevHolderWait returns how long the node still waits for the previous
// holder's ZooKeeper fence, and the holder: 0 when the fence is this node's
// own, or passed, or too far ahead to be waited for (clock_behind_fence).
func (s *StartWait) PrevHolderWait() (time.Duration, PrevHolder) {
	if s.prev == nil {
		return 0, PrevHolder{}
	}
	behind := s.Behind()
	if behind > s.prevBound() {
		return 0, s.holder
	}
	return behind, s.holder
}

// prevBound is the longest wait for the previous holder's fence that a
// correct clock can need.
func (s *StartWait) prevBound() time.Duration { return s.holder.ZKFenceAhead + s.maxWait }

func (s *StartWait) prevDetail(behind time.Duration) string {
	return fmt.Sprintf("waiting for the previous holder's ZooKeeper fence %s (%s): %s left; the previous holder may have issued IDs up to it (normal after a replaced disk or a take-over, at most --zk-fence-ahead %s)",
		s.holder.Fence.Time().Format(time.RFC3339Nano), s.holder, behind.Round(100*time.Millisecond), s.holder.ZKFenceAhead)
}

// Run polls until the clock is past the fence and passes the check, or ctx
// ends. It returns how long it waited (by the monotonic clock).
func (s *StartWait) Run(ctx context.Context) time.Duration {
	if s.prev != nil {
		return s.runPrev(ctx)
	}
	return s.run(ctx, s.clock.Mono())
}

// runPrev is Run for the previous holder's fence: it waits with
// prev_holder_fence while the wait is within what a correct clock can
// need, then leaves the rest (a clock behind it) to run.
func (s *StartWait) runPrev(ctx context.Context) time.Duration {
	start := s.clock.Mono()
	behind := s.Behind()
	if behind == 0 || behind > s.prevBound() {
		s.prev.Pass()
		return s.run(ctx, start)
	}
	s.check.Pass()
	s.log.Info().Str("prev_node_key", s.holder.NodeKey).Str("prev_addr", s.holder.Addr).Str("prev_token", s.holder.Token).
		Int64("prev_fence_ms", int64(s.holder.Fence)).Dur("left_ms", behind).Dur("zk_fence_ahead_ms", s.holder.ZKFenceAhead).
		Msg("waiting for the previous holder's ZooKeeper fence before serving (prev_holder_fence)")
	s.prev.Wait(s.prevDetail(behind))
	t := clock.NewTimer(ctx, min(behind, startPoll))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return s.clock.Mono() - start
		case <-t.C:
		}
		behind = s.Behind()
		switch {
		case behind == 0:
			waited := s.clock.Mono() - start
			s.log.Info().Dur("waited_ms", waited).Int64("prev_fence_ms", int64(s.holder.Fence)).Msg("clock passed the previous holder's ZooKeeper fence")
			s.prev.Pass()
			return waited
		case behind > s.prevBound(): // the clock went back during the wait
			s.prev.Pass()
			return s.run(ctx, start)
		}
		s.prev.Wait(s.prevDetail(behind))
		t.Reset(min(behind, startPoll))
	}
}

// startDetail is what /readyz says during a normal start's wait for the
// clock to pass the node's own fence (within --max-start-wait).
func startDetail(behind time.Duration) string {
	return fmt.Sprintf("waiting for the clock to pass the fence written before the restart: %s left (IDs of the last run may reach up to it)",
		max(behind.Round(100*time.Millisecond), 100*time.Millisecond))
}

// run is Run for a fence of this node's own (and for a previous holder's
// fence further ahead than a correct clock can need), counting the wait
// from start.
func (s *StartWait) run(ctx context.Context, start time.Duration) time.Duration {
	behind := s.Behind()
	if behind == 0 {
		s.check.Pass()
		return s.clock.Mono() - start
	}
	maxWait := s.maxWait
	if s.prev != nil {
		maxWait = s.prevBound()
	}
	failing := behind > maxWait
	if failing && s.prev != nil {
		detail := fmt.Sprintf("clock is %s behind the previous holder's ZooKeeper fence %s (%s), more than --zk-fence-ahead %s + max-start-wait %s: this clock is behind, or the previous holder's was ahead; out of service until it passes the fence",
			behind.Round(time.Millisecond), s.readyAt.UTC().Format(time.RFC3339Nano), s.holder, s.holder.ZKFenceAhead, s.maxWait)
		s.log.Warn().Dur("behind_ms", behind).Dur("max_start_wait_ms", s.maxWait).Str("prev_node_key", s.holder.NodeKey).Msg(detail)
		s.check.Fail(detail)
	} else if failing {
		detail := fmt.Sprintf("clock is %s behind the fence %s (max-start-wait %s): it went back while the node was down; out of service until it passes the fence",
			behind.Round(time.Millisecond), s.readyAt.UTC().Format(time.RFC3339Nano), s.maxWait)
		s.log.Warn().Dur("behind_ms", behind).Dur("max_start_wait_ms", s.maxWait).Msg(detail)
		s.check.Fail(detail)
	} else {
		s.log.Info().Dur("behind_ms", behind).Dur("max_start_wait_ms", s.maxWait).Msg("clock is behind the fence: waiting for it before serving")
		s.check.WaitStarting(startDetail(behind))
	}
	t := clock.NewTimer(ctx, min(behind, startPoll))
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
			s.log.Info().Dur("waited_ms", waited).Msg("clock passed the fence")
			s.check.Pass()
			return waited
		}
		if !failing && behind > maxWait { // the clock went back during the wait
			failing = true
			s.check.Fail(fmt.Sprintf("clock is %s behind the fence (max-start-wait %s)", behind.Round(time.Millisecond), maxWait))
		}
		if !failing {
			s.check.WaitStarting(startDetail(behind))
		}
		t.Reset(min(behind, startPoll))
	}
}
