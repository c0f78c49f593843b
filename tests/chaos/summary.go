package chaos

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"snowflaked/cachefile"
)

// SummaryEnv names the environment variable with a file to write the run's
// summary to (besides the test log).
const SummaryEnv = "CHAOS_SUMMARY"

// Summary collects the figures of a whole run: what was checked, what was
// injected, and how fast nodes left and returned to service. It is safe for
// concurrent use.
type Summary struct {
	mu           sync.Mutex
	mode         string
	seed         uint64
	scenarios    []string
	ids          int64
	requests     int64
	rollbacks    int
	forwards     int
	kills        int
	problems     map[string]int64
	unavailable  map[string]int64
	worstLeave   measure
	worstZnode   measure
	worstReturn  measure
	worstRefusal measure
}

type measure struct {
	d    time.Duration
	what string
	n    int
}

func (m *measure) add(d time.Duration, what string) {
	m.n++
	if d > m.d || m.n == 1 {
		m.d, m.what = d, what
	}
}

func (m measure) String() string {
	if m.n == 0 {
		return "none measured"
	}
	return fmt.Sprintf("%s (%s; %d measured)", m.d.Round(100*time.Microsecond), m.what, m.n)
}

// NewSummary returns an empty summary of a run in mode ("short" or "long")
// with the random schedule's seed.
func NewSummary(mode string, seed uint64) *Summary {
	return &Summary{mode: mode, seed: seed, problems: map[string]int64{}, unavailable: map[string]int64{}}
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

// Injected counts clock faults by the sign of their step, and kills.
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

// Left records the time from a fault to /readyz 503.
func (s *Summary) Left(d time.Duration, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worstLeave.add(d, what)
}

// ZnodeGone records the time from a fault to the alive znode's deletion.
func (s *Summary) ZnodeGone(d time.Duration, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worstZnode.add(d, what)
}

// Returned records the time from a fault (or its end) to /readyz 200.
func (s *Summary) Returned(d time.Duration, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worstReturn.add(d, what)
}

// Refused records how long a node was watched refusing to enter service.
func (s *Summary) Refused(d time.Duration, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.worstRefusal.add(d, what)
}

// String is the summary, one figure per line.
func (s *Summary) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "chaos summary (%s run, %s=%d)\n", s.mode, SeedEnv, s.seed)
	fmt.Fprintf(&b, "  scenarios:                   %d (%s)\n", len(s.scenarios), strings.Join(s.scenarios, ", "))
	fmt.Fprintf(&b, "  IDs checked:                 %d (in %d answers)\n", s.ids, s.requests)
	fmt.Fprintf(&b, "  rollbacks injected:          %d (and %d forward jumps, %d kill -9)\n", s.rollbacks, s.forwards, s.kills)
	fmt.Fprintf(&b, "  worst time to leave service: %s\n", s.worstLeave)
	fmt.Fprintf(&b, "  worst time to alive znode gone: %s\n", s.worstZnode)
	fmt.Fprintf(&b, "  worst time to return:        %s\n", s.worstReturn)
	fmt.Fprintf(&b, "  longest refusal watched:     %s\n", s.worstRefusal)
	fmt.Fprintf(&b, "  duplicates found:            %d\n", s.problems[ProblemDuplicate])
	other := map[string]int64{}
	for k, v := range s.problems {
		if k != ProblemDuplicate {
			other[k] = v
		}
	}
	fmt.Fprintf(&b, "  other problems:              %s\n", formatCounts(other))
	fmt.Fprintf(&b, "  503 answers by reason:       %s\n", formatCounts(s.unavailable))
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
