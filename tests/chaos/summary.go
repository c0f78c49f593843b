package chaos

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
)

// SummaryEnv names the environment variable with a file to write the run's
// summary to (besides the test log).
const SummaryEnv = "CHAOS_SUMMARY"

// Kinds of time the scenarios measure; the summary shows the worst of each.
const (
	MeasureLeave      = "leave service after a rollback (fault to /readyz 503)"
	MeasureZnodeGone  = "alive znode gone after a rollback (fault to ZooKeeper event)"
	MeasureReturn     = "return after a rollback (fault to /readyz 200)"
	MeasureLeaveNTP   = "leave service on NTP drift (fault to /readyz 503)"
	MeasureReturnNTP  = "return once NTP agrees (fix to /readyz 200)"
	MeasureRefusal    = "refuse service, watched (clock off its peers at start)"
	MeasureReturnPeer = "enter service once the clock agrees with peers (fix to /readyz 200)"
	MeasureRestart    = "restart after kill -9 mid-rollback (start to /readyz 200)"
	// Overlapping faults: each fault's time to return, other
	// faults going on meanwhile.
	MeasureOverlapKill   = "return after a kill -9, faults overlapping (restart to /readyz 200)"
	MeasureOverlapLeader = "return after a ZooKeeper leader restart, faults overlapping (server start to /readyz 200 of every node)"
	MeasureOverlapClock  = "return after a clock fault is undone, faults overlapping (offset 0 to /readyz 200)"
	MeasureOverlapEnd    = "return of every node once all overlapping faults ended"
)

// measureOrder is the order the summary prints measures in.
var measureOrder = []string{
	MeasureLeave, MeasureZnodeGone, MeasureReturn, MeasureLeaveNTP, MeasureReturnNTP,
	MeasureRefusal, MeasureReturnPeer, MeasureRestart,
	MeasureOverlapKill, MeasureOverlapLeader, MeasureOverlapClock, MeasureOverlapEnd,
}

// Summary collects the figures of a whole run: what was checked, what was
// injected, and how fast nodes left and returned to service. It is safe for
// concurrent use.
type Summary struct {
	mu          sync.Mutex
	mode        string
	seed        uint64
	scenarios   []string
	ids         int64
	requests    int64
	rollbacks   int
	forwards    int
	kills       int
	problems    map[string]int64
	unavailable map[string]int64
	measures    map[string]*measure
	segments    []SegmentFigures
}

// SegmentFigures are what a segment scenario checked and measured.
type SegmentFigures struct {
	IDs         int64 // dense IDs issued and checked
	Duplicates  int64
	Problems    int64 // others: out of order, undocumented answers, reissuable, ...
	Lost        int64 // handed out, neither issued nor returned
	Kills       int   // kill -9 of nodes serving the tag
	Unavailable int64 // 503 segment_unavailable answers
}

type measure struct {
	worst time.Duration
	what  string
	n     int
}

func (m measure) String() string {
	return fmt.Sprintf("%s (%s; %d measured)", m.worst.Round(100*time.Microsecond), m.what, m.n)
}

// NewSummary returns an empty summary of a run in mode ("short" or "long")
// with the random schedule's seed.
func NewSummary(mode string, seed uint64) *Summary {
	return &Summary{mode: mode, seed: seed, problems: map[string]int64{}, unavailable: map[string]int64{}, measures: map[string]*measure{}}
}

// AddScenario adds a finished scenario's checker report and 503 counts.
func (s *Summary) AddScenario(name string, r Report, unavailable map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenarios = append(s.scenarios, name)
	s.ids += r.IDs
	s.requests += r.Requests
	for k, v := range r.Problems {
		s.problems[k] += v
	}
	for k, v := range unavailable {
		s.unavailable[k] += v
	}
}

// AddSegments adds a finished segment scenario (its duplicates count in the
// run's duplicates).
func (s *Summary) AddSegments(name string, f SegmentFigures) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenarios = append(s.scenarios, name)
	s.segments = append(s.segments, f)
	if f.Duplicates > 0 {
		s.problems[ProblemDuplicate] += f.Duplicates
	}
	if f.Problems > 0 {
		s.problems["segment"] += f.Problems
	}
}

// Injected counts a clock fault by the sign of its step.
func (s *Summary) Injected(step time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if step < 0 {
		s.rollbacks++
	} else if step > 0 {
		s.forwards++
	}
}

// Killed counts a kill -9.
func (s *Summary) Killed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kills++
}

// Measure records a time of one kind (Measure* constants); what says where
// it was measured.
func (s *Summary) Measure(kind string, d time.Duration, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.measures[kind]
	if m == nil {
		m = &measure{}
		s.measures[kind] = m
	}
	m.n++
	if m.n == 1 || d > m.worst {
		m.worst, m.what = d, what
	}
}

// Worst returns the worst time of a kind and whether any was measured.
func (s *Summary) Worst(kind string) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.measures[kind]; m != nil {
		return m.worst, true
	}
	return 0, false
}

// String is the summary, one figure per line.
func (s *Summary) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos summary (%s run, %s=%d)\n", s.mode, SeedEnv, s.seed)
	fmt.Fprintf(&b, "  scenarios: %d (%s)\n", len(s.scenarios), strings.Join(s.scenarios, ", "))
	fmt.Fprintf(&b, "  IDs checked: %d (in %d answers)\n", s.ids, s.requests)
	fmt.Fprintf(&b, "  rollbacks injected: %d (and %d forward jumps, %d kill -9)\n", s.rollbacks, s.forwards, s.kills)
	for _, f := range s.segments {
		fmt.Fprintf(&b, "  dense (segment) IDs checked: %d, %d lost over %d kill -9, %d answers 503 segment_unavailable\n", f.IDs, f.Lost, f.Kills, f.Unavailable)
	}
	fmt.Fprintf(&b, "  duplicates found: %d\n", s.problems[ProblemDuplicate])
	other := map[string]int64{}
	for k, v := range s.problems {
		if k != ProblemDuplicate {
			other[k] = v
		}
	}
	fmt.Fprintf(&b, "  other problems: %s\n", formatCounts(other))
	fmt.Fprintf(&b, "  503 answers by reason: %s\n", formatCounts(s.unavailable))
	for _, kind := range measureOrder {
		if m := s.measures[kind]; m != nil {
			fmt.Fprintf(&b, "  time to %s: worst %s\n", kind, m)
		} else {
			fmt.Fprintf(&b, "  time to %s: none measured\n", kind)
		}
	}
	return b.String()
}

func formatCounts(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// WriteFile writes the summary to the file named by CHAOS_SUMMARY, if set;
// it returns the path written ("" when unset).
func (s *Summary) WriteFile() (string, error) {
	path := os.Getenv(SummaryEnv)
	if path == "" {
		return "", nil
	}
	if err := cachefile.WriteFileAtomic(path, []byte(s.String()), 0o644); err != nil {
		return "", fmt.Errorf("write chaos summary: %w", err)
	}
	return path, nil
}
