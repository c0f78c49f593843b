package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// SeedEnv names the environment variable that replays a random schedule.
const SeedEnv = "CHAOS_SEED"

// ErrBadSeed is wrapped when CHAOS_SEED is not an unsigned integer.
var ErrBadSeed = errors.New("bad " + SeedEnv)

// Seed returns CHAOS_SEED if set, else a fresh seed from the time; the
// caller prints it so that a failing run can be replayed.
func Seed() (uint64, error) {
	raw, ok := os.LookupEnv(SeedEnv)
	if !ok || raw == "" {
		return uint64(time.Now().UnixNano()), nil
	}
	s, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: want an unsigned integer: %w", ErrBadSeed, raw, err)
	}
	return s, nil
}

// Fault is one change of one node's chaos clock offset.
type Fault struct {
	At     time.Duration // since the schedule's start
	Node   int           // index of the node
	Offset time.Duration // the node's new offset (POST /debug/chaos/clock?offset=…)
	Step   time.Duration // Offset minus the node's previous offset: negative is a rollback
}

// String describes the fault for logs.
func (f Fault) String() string {
	kind, size := "forward jump", f.Step
	if f.Step < 0 {
		kind, size = "rollback", -f.Step
	}
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }
	return fmt.Sprintf("at %s node %d %s of %s (offset %s)", r(f.At), f.Node, kind, r(size), r(f.Offset))
}

// ScheduleConfig shapes a random schedule.
type ScheduleConfig struct {
	Nodes    int           // nodes to pick from (at least 1)
	Duration time.Duration // faults happen in [0, Duration)
	MinGap   time.Duration // time between two faults: uniform in [MinGap, MaxGap]
	MaxGap   time.Duration
	// MaxOffset bounds every node's offset to ±MaxOffset; steps are drawn
	// up to it as well. Small rollbacks (within the 5ms tolerance) are
	// 1–4ms.
	MaxOffset time.Duration
}

// Validate reports a config that cannot make a schedule.
func (c ScheduleConfig) Validate() error {
	if c.Nodes < 1 || c.Duration <= 0 || c.MinGap <= 0 || c.MaxGap < c.MinGap || c.MaxOffset < 10*time.Millisecond {
		return fmt.Errorf("schedule config %+v: want nodes >= 1, positive duration and gaps, MinGap <= MaxGap, MaxOffset >= 10ms", c)
	}
	return nil
}

// NewSchedule returns the faults for seed: the same seed and config give
// the same schedule. Rollbacks small (within tolerance) and large, forward
// jumps, and resets to zero are mixed (no fault leaves an offset as it
// was); every node ends at offset 0 with a last reset at Duration.
func NewSchedule(seed uint64, cfg ScheduleConfig) ([]Fault, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6368616f73)) // "chaos"
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
	}
	offsets := make([]time.Duration, cfg.Nodes)
	var out []Fault
	maxFaults := int(cfg.Duration/cfg.MinGap) + 1
	for at := between(cfg.MinGap, cfg.MaxGap); at < cfg.Duration && len(out) < maxFaults; at += between(cfg.MinGap, cfg.MaxGap) {
		n := rng.IntN(cfg.Nodes)
		var step time.Duration
		switch p := rng.IntN(100); {
		case p < 30: // within the rollback tolerance
			step = -between(time.Millisecond, 4*time.Millisecond)
		case p < 60:
			step = -between(20*time.Millisecond, cfg.MaxOffset)
		case p < 90:
			step = between(20*time.Millisecond, cfg.MaxOffset)
		default: // back to the right time, or a jump when already there
			if step = -offsets[n]; step == 0 {
				step = between(20*time.Millisecond, cfg.MaxOffset)
			}
		}
		next := offsets[n] + step
		if next > cfg.MaxOffset || next < -cfg.MaxOffset {
			next = offsets[n] - step // the other way stays within bounds
		}
		out = append(out, Fault{At: at, Node: n, Offset: next, Step: next - offsets[n]})
		offsets[n] = next
	}
	for n, off := range offsets {
		if off != 0 {
			out = append(out, Fault{At: cfg.Duration, Node: n, Offset: 0, Step: -off})
		}
	}
	return out, nil
}
