// Package health decides whether a node may issue IDs. Independent checks
// (clock rollback, wall/monotonic watcher, NTP, peers, the coordinator's
// fence and lease) each pass or fail with a reason; the node is in service
// only while every check passes. The checks that measure the clock live in
// clockguard; this package holds only the state they feed.
package health

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// State is where a node is in its life.
type State int32

// The states of a node.
const (
	Starting     State = iota // some check has not reported yet
	InService                 // every check passes: IDs are issued
	OutOfService              // some check fails: no IDs
	stopping                  // shutting down: no IDs
)

// String returns the state's name as used in /readyz, /clock and metrics.
func (s State) String() string {
	switch s {
	case Starting:
		return "starting"
	case InService:
		return "in_service"
	case OutOfService:
		return "out_of_service"
	case stopping:
		return "stopping"
	}
	return "unknown"
}

// MarshalText writes the state's name, so JSON shows "in_service", not 1.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a state's name as written by MarshalText.
func (s *State) UnmarshalText(b []byte) error {
	for _, st := range States {
		if st.String() == string(b) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("health: unknown state %q", b)
}

// States lists every state, for metrics.
var States = []State{Starting, InService, OutOfService, stopping}

// Reason says why a node is not in service. The values are public API
// (/readyz, /clock, 503 bodies, metrics labels).
type Reason string

// Reasons a node is not in service.
const (
	ReasonNone             Reason = ""
	ReasonStarting         Reason = "starting"             // a check has not reported yet
	ReasonStopping         Reason = "stopping"             // graceful shutdown
	ReasonClockBehindFence Reason = "clock_behind_fence"   // at start the clock is behind the fence by more than --max-start-wait
	ReasonClockRollback    Reason = "clock_rollback"       // the clock went back beyond --rollback-tolerance
	ReasonNTPOffset        Reason = "ntp_offset"           // |NTP offset| > --ntp-max-offset
	ReasonNTPUnreachable   Reason = "ntp_unreachable"      // no NTP server answered and --ntp-required is set
	ReasonPeerOffset       Reason = "peer_offset"          // a strict majority of the clocks compared is beyond --peer-max-offset of this one
	ReasonLeaseLost        Reason = "lease_lost"           // the ZooKeeper lease is not (or no longer) held
	ReasonZKFence          Reason = "zk_fence"             // less than a third of --zk-fence-ahead is left before the fence ZooKeeper acknowledged (renewals failing)
	ReasonFencePersist     Reason = "fence_persist_failed" // the local fence could not be written to disk
	ReasonFenceReached     Reason = "fence_reached"        // the clock reached the persisted fence
	ReasonTimeOverflow     Reason = "time_overflow"        // the clock is past the end of the layout's timestamp field
	ReasonClockStalled     Reason = "clock_stalled"        // the wall clock did not reach the next tick while the generator waited for it
	ReasonClockJump        Reason = "clock_jump"           // the clock jumped forward beyond the fence headroom, not confirmed yet
	ReasonBorrowExhausted  Reason = "borrow_exhausted"     // --rollback-policy borrow: the IDs reached the fence while the clock was behind them
	ReasonPrevHolderFence  Reason = "prev_holder_fence"    // at start, waiting for the previous holder's ZooKeeper fence (state starting)
)

type checkStatus int8

const (
	pending checkStatus = iota
	passing
	failing
)

// Check is one condition of service. Its owner calls Pass or Fail whenever
// it learns something; repeated calls with the same verdict are cheap.
type Check struct {
	g      *Guard
	reason Reason
	status checkStatus
	detail string
	// starting: the pending check's detail is that of a wait every start
	// makes (WaitStarting), shown under ReasonStarting, not its reason.
	starting bool
}

// Reason returns the reason the check reports when it fails.
func (c *Check) Reason() Reason { return c.reason }

// Pass marks the condition as met.
func (c *Check) Pass() { c.g.set(c, passing, "") }

// Fail marks the condition as failed; detail carries the figures
// (e.g. "clock 5.2s behind the last issued ID, tolerance 5ms").
func (c *Check) Fail(detail string) { c.g.set(c, failing, detail) }

// Wait keeps the condition pending (the node stays Starting) and says what
// it waits for: while it is the first pending check, the guard's state is
// Starting with the check's reason and detail instead of "waiting for
// <reason>". For a wait that is part of a normal start (the previous
// holder's fence), not a fault.
func (c *Check) Wait(detail string) { c.g.set(c, pending, detail) }

// WaitStarting is Wait for a wait that is part of every start, not a
// fault of its reason (the clock passing a fence of the node's own, a
// fraction of a second): while it is the first pending check the guard
// stays Starting with ReasonStarting, and detail, in words, says what it
// waits for and how long, instead of "waiting for <reason>".
func (c *Check) WaitStarting(detail string) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.status == pending && c.detail == detail && c.starting {
		return
	}
	c.status, c.detail, c.starting = pending, detail, true
	g.recompute()
}

// Status is a snapshot of the guard.
type Status struct {
	State  State     `json:"state"`
	Reason Reason    `json:"reason"`
	Detail string    `json:"detail,omitempty"`
	Since  time.Time `json:"since"`
}

// Transition is one change of state.
type Transition struct {
	From, To State
	Reason   Reason
	Detail   string
	At       time.Time
}

// Guard holds the node's state. It is safe for concurrent use; Ready is a
// single atomic load for the /id hot path.
type Guard struct {
	log zerolog.Logger
	now func() time.Time

	ready atomic.Bool

	mu          sync.Mutex
	checks      []*Check
	stopping    bool
	status      Status
	entered     time.Time // when status.State was entered: time.Now, monotonic
	transitions map[Reason]int64
	subs        []chan struct{}
	hooks       []func(Transition)
}

// New returns a guard in state Starting. now is used to stamp transitions
// (nil means time.Now); the time spent in a state, which the log reports,
// is measured on the monotonic clock instead.
func New(log zerolog.Logger, now func() time.Time) *Guard {
	if now == nil {
		now = time.Now
	}
	g := &Guard{log: log, now: now, transitions: map[Reason]int64{}}
	g.status = Status{State: Starting, Reason: ReasonStarting, Since: now()}
	g.entered = time.Now()
	return g
}

// Check registers a condition that starts pending: the node stays Starting
// until every check has passed once. Register all checks before serving.
func (g *Guard) Check(reason Reason) *Check {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &Check{g: g, reason: reason}
	g.checks = append(g.checks, c)
	g.recompute()
	return c
}

// Ready reports whether the node is in service.
func (g *Guard) Ready() bool { return g.ready.Load() }

// Status returns the current state, reason and detail.
func (g *Guard) Status() Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status
}

// Stop moves the guard to Stopping for good.
func (g *Guard) Stop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopping = true
	g.recompute()
}

// Subscribe returns a channel that receives a value (coalesced) after every
// transition. Reconcilers read Status after each signal.
func (g *Guard) Subscribe() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := make(chan struct{}, 1)
	g.subs = append(g.subs, ch)
	return ch
}

// OnTransition registers fn to be called, under the guard's lock, on every
// transition. fn must be quick and must not call the guard.
func (g *Guard) OnTransition(fn func(Transition)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hooks = append(g.hooks, fn)
}

// Transitions returns how many transitions each reason caused (the reason of
// the new state; ReasonNone for entering service).
func (g *Guard) Transitions() map[Reason]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[Reason]int64, len(g.transitions))
	for k, v := range g.transitions {
		out[k] = v
	}
	return out
}

// TransitionsInServiceKey is the key under which Snapshot.Transitions counts
// entries into service (ReasonNone, which would be an empty JSON key).
const TransitionsInServiceKey = "in_service"

// Snapshot is the guard's status, failing checks and transition counts,
// read at one instant.
type Snapshot struct {
	Status Status
	// Failing maps each failing check to its detail (empty when none fails).
	Failing map[Reason]string
	// Transitions counts transitions by the reason of the new state; entries
	// into service are under TransitionsInServiceKey.
	Transitions map[string]int64
}

// Snapshot returns the status, the failing checks and the transition counts
// under one lock, so they agree with each other.
func (g *Guard) Snapshot() Snapshot {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := Snapshot{Status: g.status, Failing: make(map[Reason]string), Transitions: make(map[string]int64, len(g.transitions))}
	for _, c := range g.checks {
		if c.status == failing {
			s.Failing[c.reason] = c.detail
		}
	}
	for reason, count := range g.transitions {
		key := string(reason)
		if reason == ReasonNone {
			key = TransitionsInServiceKey
		}
		s.Transitions[key] += count
	}
	return s
}

// Failing lists the checks that currently fail, with their details.
func (g *Guard) Failing() map[Reason]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[Reason]string{}
	for _, c := range g.checks {
		if c.status == failing {
			out[c.reason] = c.detail
		}
	}
	return out
}

func (g *Guard) set(c *Check, s checkStatus, detail string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c.status == s && c.detail == detail && !c.starting {
		return
	}
	c.status, c.detail, c.starting = s, detail, false
	g.recompute()
}

// recompute derives the state from the checks; g.mu is held.
func (g *Guard) recompute() {
	next := Status{State: InService, Reason: ReasonNone}
	var firstPending *Check
	for _, c := range g.checks {
		if c.status == failing {
			next = Status{State: OutOfService, Reason: c.reason, Detail: c.detail}
			break
		}
		if c.status == pending && firstPending == nil {
			firstPending = c
		}
	}
	if next.State == InService && firstPending != nil {
		next = Status{State: Starting, Reason: ReasonStarting, Detail: "waiting for " + string(firstPending.reason)}
		if firstPending.detail != "" { // Wait: it says what it waits for
			next.Detail = firstPending.detail
			if !firstPending.starting {
				next.Reason = firstPending.reason
			}
		}
	}
	if g.stopping {
		next = Status{State: stopping, Reason: ReasonStopping}
	}
	cur := g.status
	if next.State == cur.State && next.Reason == cur.Reason && next.Detail == cur.Detail {
		return
	}
	next.Since = cur.Since
	// The time spent in the previous state is measured on the monotonic
	// clock: a step of the wall clock (or of now) never makes it negative.
	inPrevious := time.Since(g.entered)
	if next.State != cur.State || next.Reason != cur.Reason {
		next.Since = g.now()
		g.entered = time.Now()
	}
	g.status = next
	g.ready.Store(next.State == InService)
	if next.State == cur.State && next.Reason == cur.Reason {
		return // only the figures changed: not a transition
	}
	t := Transition{From: cur.State, To: next.State, Reason: next.Reason, Detail: next.Detail, At: next.Since}
	g.transitions[next.Reason]++
	ev := g.log.Info()
	if next.State == OutOfService {
		ev = g.log.Warn()
	}
	ev.Str("from", cur.State.String()).Str("to", next.State.String()).Str("reason", string(next.Reason)).
		Str("detail", next.Detail).Dur("in_previous_state_ms", inPrevious).Msg("service state changed")
	for _, fn := range g.hooks {
		fn(t)
	}
	for _, ch := range g.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
