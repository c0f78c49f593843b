package clockguard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
)

// JumpHold is how long a forward clock jump must hold before the node
// trusts it when neither NTP nor peers can confirm it.
const JumpHold = time.Minute

// jumpPoll is how often the jump guard looks at the clock (unless it
// shares the node's sampler: shareSampler) and at the sources' verdicts on
// a held jump.
const jumpPoll = 50 * time.Millisecond

// jumpConfirmer is one source that can confirm the clock after a jump.
type jumpConfirmer interface {
	// judge returns the verdict on the clock of the source's last round,
	// if it began at or after sinceMono (the monotonic clock): agrees or
	// disagrees by a strict majority of its jury. A round that measured
	// nothing (no peer list, no usable NTP answer, only answers too
	// imprecise to judge) or reached no majority is noVerdict.
	judge(sinceMono time.Duration) jumpVerdict
	// enabled reports whether the source is configured at all.
	enabled() bool
	// recheck asks the source for a fresh verdict (may block for its
	// timeout; called from the guard's loop).
	recheck(ctx context.Context)
	// recheckWhile makes the source's own rounds re-check soon (with their
	// backoff) for as long as f reports true.
	recheckWhile(f func() bool)
}

// JumpGuard (the clock_jump check) keeps a forward clock jump larger than the fence headroom
// out of the fences until it is confirmed. It tracks the skew
// of the wall clock against the monotonic one from a trusted baseline. A
// skew above the threshold (--fence-ahead) makes the clock suspect: the
// clock_jump check fails, and Holding tells the fence keeper and the
// ZooKeeper renewals not to persist fences on the suspect time, so the
// generator stays below the old fence and nothing is issued on it. The
// suspicion ends when the jump is undone (the skew falls back below the
// threshold), or when NTP or the peers, in a round begun after the jump
// (one is asked at once, and their rounds re-check with backoff while the
// jump is held), agree with the new time by a strict majority, or when
// none of them reached a verdict since the jump (not configured,
// unreachable) for JumpHold; then the jump, as measured, is added to the
// baseline (a second jump meanwhile is a suspicion of its own). Once a
// source has disagreed with the jump, JumpHold no longer applies: only an
// agreement or the undo ends the suspicion, whatever later rounds fail to
// measure.
//
// A correction is not a jump. The guard remembers the trusted trajectory
// (high: the largest trusted wall − mono): a step back lowers the baseline
// but not high, so a later step forward that brings the wall clock back to
// where the monotonic clock says it should be (within the threshold) is
// followed at once, whatever its size. Only the part of a step beyond the
// trusted trajectory counts as a jump: a correction that overshoots is held
// for its overshoot, a step forward without a step back before it is held
// as a whole. Safe because a correction never puts the clock past a time
// the node already trusted and persisted fences on (high + the time the
// monotonic clock measured since), so it burns no time the fences did not
// already cover; and the generator never issues below its last issued ID,
// whatever the clock does.
type JumpGuard struct {
	clk        clock.Clock
	threshold  time.Duration
	hold       time.Duration
	check      *health.Check
	confirmers []jumpConfirmer
	log        zerolog.Logger
	// stepped, if set, is called (outside the lock, quick, non-blocking)
	// after a forward step of reaskStep or more that is followed at once
	// (within the headroom, or a correction): the fence keeper extends the
	// fence at once instead of at its next tick, so requests do not run
	// into the old fence. Set before Run.
	stepped func()
	// sampler reads the clocks for Run and feeds observe (and, shared,
	// the node's watcher). Replaced before Run by shareSampler.
	sampler *Sampler

	mu       sync.Mutex
	baseline int64         // trusted wall − mono (ns)
	high     int64         // the largest trusted wall − mono: the trajectory a correction returns to
	suspect  time.Duration // the unconfirmed forward skew beyond high; 0 when trusted
	since    int64         // wall (ns) when the suspicion began
	sinceMon time.Duration // mono when the suspicion began
	asked    bool          // the confirmers were asked since then
	// verdicts holds, per confirmer, its last verdict reached since the
	// suspicion began (none until it reaches one; a round that measures
	// nothing leaves it as it was).
	verdicts []jumpVerdict
	// reask: a jump was undone; the confirmers judged the jumped clock
	// (a peer round failing peer_offset, say) and must look again.
	reask bool
	// reaskStepped: the clock stepped by reaskStep or more (forward within
	// the headroom, a correction, or back); every confirmer looks again.
	reaskStepped bool
}

// JumpConfig configures NewJumpGuard.
type JumpConfig struct {
	// Threshold is the fence headroom (--fence-ahead): a forward jump
	// beyond it is held.
	Threshold time.Duration
	// NTP and Peers confirm a held jump; a nil or disabled one is left out.
	NTP   *NTP
	Peers *Peers
	// Stepped, if set, is called (outside the lock, quick, non-blocking)
	// after a forward step that is followed at once (within the headroom,
	// or a correction): the fence keeper extends the fence at once.
	Stepped func()
	// Interval, when positive, makes Run read the clocks every Interval
	// and hand each reading to Feed as well, after observing it: the
	// node's watcher (clock_rollback) and the jump guard judge the same
	// readings, taken by one loop. Zero: Run reads them every 50ms, for
	// the jump guard alone.
	Interval time.Duration
	Feed     func(Sample)
	Log      zerolog.Logger
}

// NewJumpGuard registers clock_jump on g (passing) and returns the guard
// that keeps it; Run it.
func NewJumpGuard(g *health.Guard, c clock.Clock, cfg JumpConfig) *JumpGuard {
	j := newJumpGuard(g, c, cfg.Threshold, cfg.Log, ntpConfirmer{cfg.NTP}, peersConfirmer{cfg.Peers})
	j.stepped = cfg.Stepped
	switch {
	case cfg.Interval > 0 && cfg.Feed != nil:
		j.shareSampler(cfg.Interval, cfg.Feed)
	case cfg.Interval > 0:
		j.sampler = newSampler(c, cfg.Interval, j.observe)
	}
	return j
}

func newJumpGuard(g *health.Guard, c clock.Clock, threshold time.Duration, log zerolog.Logger, confirmers ...jumpConfirmer) *JumpGuard {
	j := &JumpGuard{clk: c, threshold: threshold, hold: JumpHold, check: g.Check(health.ReasonClockJump), log: log}
	for _, cf := range confirmers {
		if cf != nil && cf.enabled() {
			j.confirmers = append(j.confirmers, cf)
		}
	}
	j.sampler = newSampler(c, jumpPoll, j.observe)
	j.baseline = c.WallNanos() - int64(c.Mono())
	j.high = j.baseline
	for _, cf := range j.confirmers {
		cf.recheckWhile(j.Suspicious)
	}
	j.check.Pass()
	return j
}

// jumpVerdict is a confirmer's last verdict on a held jump.
type jumpVerdict int8

const (
	noVerdict jumpVerdict = iota
	agrees
	disagrees
)

// Suspicious reports whether a jump is held, without looking at the clock
// (the sources' rounds call it).
func (j *JumpGuard) Suspicious() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.suspect > 0
}

// Holding reports whether fences must not be persisted now: the clock
// jumped forward beyond the threshold and that is not confirmed yet. It
// looks at the clock itself, so a caller about to persist a fence is never
// ahead of the guard's loop.
func (j *JumpGuard) Holding() bool {
	j.step()
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.suspect > 0
}

// step reads the clocks and observes the reading.
func (j *JumpGuard) step() { j.observe(readSample(j.clk)) }

// observe compares a reading of the clocks with the baseline: it starts a
// suspicion, ends one whose jump was undone, starts it afresh when the clock
// moved again while held (what the sources judged is not the clock any
// more), or moves the baseline along while the clock is trusted. The
// check's state is set under the lock, so two goroutines observing (the
// sampler, the fence keeper, the renewals) cannot leave it contrary to the
// suspicion.
func (j *JumpGuard) observe(s Sample) {
	wall, mono := s.Wall, s.monoAfter()
	var logLine func() // written (and stepped called) after the lock is released (a slow stdout must not hold it)
	defer func() {
		if logLine != nil {
			logLine()
		}
	}()
	j.mu.Lock()
	defer j.mu.Unlock()
	skew := time.Duration(wall - int64(mono) - j.baseline) // the step since the last look
	over := time.Duration(wall - int64(mono) - j.high)     // beyond the trusted trajectory
	switch {
	case j.suspect == 0 && over > j.threshold,
		j.suspect > 0 && over > j.threshold && (over-j.suspect >= reaskStep || j.suspect-over >= reaskStep):
		moved := j.suspect > 0
		j.suspect, j.since, j.sinceMon, j.asked = over, wall, mono, false
		j.verdicts = make([]jumpVerdict, len(j.confirmers))
		detail := fmt.Sprintf("the clock jumped forward by %v, more than the fence headroom %v: no fence is persisted on it until NTP or the peers confirm it, or it holds for %v with neither configured",
			over.Round(time.Millisecond), j.threshold, j.hold)
		if over != skew && !moved {
			detail = fmt.Sprintf("the clock stepped forward by %v, %v beyond the time the monotonic clock expects (more than the fence headroom %v; the rest corrected an earlier step back): no fence is persisted on it until NTP or the peers confirm it, or it holds for %v with neither configured",
				skew.Round(time.Millisecond), over.Round(time.Millisecond), j.threshold, j.hold)
		}
		logLine = func() {
			j.log.Warn().Dur("jump_ms", over).Dur("step_ms", skew).Dur("threshold_ms", j.threshold).Bool("moved_while_held", moved).Msg("suspect forward clock jump: fences held")
		}
		j.check.Fail(detail)
		j.baseline = wall - int64(mono)
	case j.suspect > 0 && over <= j.threshold:
		j.suspect, j.baseline, j.reask = 0, wall-int64(mono), j.asked
		j.high = max(j.high, j.baseline)
		logLine = func() { j.log.Info().Dur("skew_ms", over).Msg("the forward clock jump was undone: fences resume") }
		j.check.Pass()
	case j.suspect > 0:
		j.baseline = wall - int64(mono) // held: small moves of the jumped clock
	default:
		if skew >= reaskStep || skew <= -reaskStep {
			// A step within the headroom (or back), or a correction:
			// every source judged the clock before it. One whose verdict
			// is against this node (peer_offset, ntp_offset) must not keep
			// it out until its next regular round, and one that passes it
			// must not keep it in on a clock that stepped off.
			j.reaskStepped = true
		}
		if skew >= reaskStep && j.stepped != nil {
			logLine = j.stepped
		}
		if skew > j.threshold {
			// Not a jump: it returns the clock to the trusted trajectory
			// (over is within the threshold), undoing an earlier step back.
			stepped := j.stepped
			logLine = func() {
				j.log.Info().Dur("step_ms", skew).Dur("beyond_expected_ms", over).Dur("threshold_ms", j.threshold).
					Msg("the clock stepped forward back to the time the monotonic clock expects: a correction of an earlier step back, not a jump")
				if stepped != nil {
					stepped()
				}
			}
		}
		j.baseline = wall - int64(mono) // follow small drifts, accepted backward steps and corrections
		j.high = max(j.high, j.baseline)
		if mutation.Broken(mutation.CorrectionIsAJump) {
			j.high = j.baseline
		}
	}
}

// reaskStep is the smallest wall-clock step (forward within the headroom,
// or backward) after which NTP and the peers are asked again.
const reaskStep = 100 * time.Millisecond

// shareSampler makes Run read the clocks every interval and hand each
// reading to feed as well, after observing it: the node's watcher
// (clock_rollback) and the jump guard judge the same readings, taken by one
// loop. Call it before Run.
func (j *JumpGuard) shareSampler(interval time.Duration, feed func(Sample)) {
	j.sampler = newSampler(j.clk, interval, j.observe, feed)
}

// Run watches the clock and confirms a suspect jump, until ctx ends. The
// clock is looked at (by the sampler) on a goroutine of its own: asking a
// source (an NTP round waits for the gap between queries and its timeout)
// must not delay seeing a jump or its undo.
func (j *JumpGuard) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { j.sampler.Run(ctx) })
	clock.Every(ctx, jumpPoll, nil, func() {
		j.tryConfirm(ctx)
		j.reaskIfUndone(ctx)
	})
}

// reaskIfUndone asks the confirmers again after an undone jump they had
// judged, so a verdict on the jumped clock (peer_offset, ntp_offset) does
// not outlive the jump until their next regular round; after any other
// step of at least reaskStep it asks every source at once (each judged the
// clock before the step): a verdict against this node does not keep it out
// once its clock is set right, and a clock stepped off is found in one
// round, not at the next regular one. The sources' own limits (NTP's gap
// between queries) still apply.
func (j *JumpGuard) reaskIfUndone(ctx context.Context) {
	j.mu.Lock()
	reask := j.reask || j.reaskStepped
	j.reask, j.reaskStepped = false, false
	j.mu.Unlock()
	if !reask {
		return
	}
	for _, cf := range j.confirmers {
		cf.recheck(ctx)
	}
}

// tryConfirm accepts a suspect jump that the sources confirmed (asking
// each once, at once, after the jump; their rounds go on re-checking while
// it is held) or that held for JumpHold with no source reaching a verdict.
// Each source's last verdict since the jump counts: accepted when at least
// one agrees and none disagrees, so one source agreeing never overrides
// another that disagrees by its majority (a bad time source the peers
// share, say), and a round that measures nothing erases nothing.
func (j *JumpGuard) tryConfirm(ctx context.Context) {
	j.mu.Lock()
	suspect, since, sinceMon, asked := j.suspect, j.since, j.sinceMon, j.asked
	j.asked = true
	j.mu.Unlock()
	if suspect == 0 {
		return
	}
	if !asked {
		for _, cf := range j.confirmers {
			cf.recheck(ctx)
		}
	}
	latest := make([]jumpVerdict, len(j.confirmers))
	for i, cf := range j.confirmers {
		latest[i] = cf.judge(sinceMon)
	}
	by, ok := j.accept(since, sinceMon, latest)
	if ok {
		j.log.Warn().Dur("jump_ms", suspect).Str("confirmed_by", by).Msg("forward clock jump accepted: fences resume on the new time")
	}
}

// accept records the sources' latest verdicts on the suspicion that began
// at since and accepts the jump when they allow it, under the lock.
func (j *JumpGuard) accept(since int64, sinceMon time.Duration, latest []jumpVerdict) (by string, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.since != since || j.suspect == 0 { // ended or restarted meanwhile
		return "", false
	}
	against, judged := false, false
	for i, v := range latest {
		if v != noVerdict {
			j.verdicts[i] = v
		}
		switch j.verdicts[i] {
		case agrees:
			if by == "" {
				by = fmt.Sprintf("%T", j.confirmers[i])
			}
			judged = true
		case disagrees:
			against, judged = true, true
		}
	}
	switch {
	case against:
		return "", false
	case by == "" && (judged || j.clk.Mono()-sinceMon < j.hold):
		return "", false
	case by == "":
		by = fmt.Sprintf("held for %v with no NTP or peer verdict", j.hold)
	}
	// The jump as measured becomes trusted, not whatever the clock reads
	// now: a second jump since is seen by the next step as one of its own.
	j.baseline = j.high + int64(j.suspect)
	j.suspect, j.high = 0, j.baseline
	j.check.Pass()
	return by, true
}

// ntpConfirmer confirms through the NTP check.
type ntpConfirmer struct{ ntp *NTP }

func (c ntpConfirmer) enabled() bool { return c.ntp != nil && c.ntp.Enabled() }

func (c ntpConfirmer) recheck(ctx context.Context) { _, _ = c.ntp.checkNow(ctx) }

func (c ntpConfirmer) recheckWhile(f func() bool) { c.ntp.RecheckWhile(f) }

// judge: a strict majority of the servers configured agrees, or
// disagrees; one server of several decides nothing alone.
func (c ntpConfirmer) judge(sinceMono time.Duration) jumpVerdict {
	s := c.ntp.Snapshot()
	switch {
	case !s.measuredSince(sinceMono):
		return noVerdict
	case s.Agrees():
		return agrees
	case s.offsetBeyond():
		return disagrees
	}
	return noVerdict
}

// peersConfirmer confirms through the peer check: a round begun after the
// jump in which a strict majority of the peers listed agrees with this
// clock (or disagrees). The node's own clock is the suspect: it has no
// vote here, unlike in peer_offset.
type peersConfirmer struct{ peers *Peers }

func (c peersConfirmer) enabled() bool { return c.peers != nil }

func (c peersConfirmer) recheck(ctx context.Context) { _, _ = c.peers.checkNow(ctx) }

func (c peersConfirmer) recheckWhile(f func() bool) { c.peers.RecheckWhile(f) }

func (c peersConfirmer) judge(sinceMono time.Duration) jumpVerdict {
	s := c.peers.Snapshot()
	if !s.measuredSince(sinceMono) {
		return noVerdict
	}
	// Agree counts the node's own clock: take it out. The jury is every
	// peer listed, reachable or not, so one reachable peer of several does
	// not decide alone (as with NTP's servers).
	peerAgree := s.Agree - 1
	jury := s.Reachable + s.Unreachable
	switch {
	case 2*peerAgree > jury:
		return agrees
	case 2*s.Disagree > jury:
		return disagrees
	}
	return noVerdict
}
