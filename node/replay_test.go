package node

import (
	"crypto/sha256"
	"fmt"
	"os"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// TestSimulation_Replays runs seeds of each simulation twice and expects
// the same trace both times, compared by its sha256, so that SIM_SEED=N
// replays exactly what a failure saw: every timer of a world is armed
// through one clock.Apart, so no two fire at one virtual instant in the
// runtime's random order, and the product lets an ended context or a
// stop win over whatever came with it where select would pick at random.
// make test runs the first seeds of each (the counts below); SIM_SEEDS=N
// runs N seeds of each, SIM_SEED=N that one; make test also runs the seeds
// that once parted (parted), each for a cause since removed. A seed whose
// two runs part is named with the first line they differ in.
func TestSimulation_Replays(t *testing.T) {
	if testsupport.RaceEnabled {
		t.Skip("the simulations run without -race")
	}
	cases := []struct {
		name   string
		seeds  int
		parted []uint64
		run    func(t *testing.T, seed uint64) ([]string, error)
	}{
		{"snowflake", 5, nil, func(t *testing.T, seed uint64) ([]string, error) {
			st, err := runSnowSim(t, seed, 300, snowMixed)
			return st.trace, err
		}},
		{"borrow", 2, []uint64{98}, func(t *testing.T, seed uint64) ([]string, error) {
			st, err := runSnowSim(t, seed, 300, snowBorrow)
			return st.trace, err
		}},
		{"paths", 2, []uint64{7, 12, 81}, func(t *testing.T, seed uint64) ([]string, error) {
			st, err := runPathsSim(t, seed, 300)
			return st.trace, err
		}},
		{"rules", rulesSeeds, nil, runRulesSim},
		{"segments", 20, nil, func(t *testing.T, seed uint64) ([]string, error) {
			return runSegmentSimTrace(t, seed, 300, worldPlain)
		}},
		{"opaque", 20, nil, func(t *testing.T, seed uint64) ([]string, error) {
			return runSegmentSimTrace(t, seed, 300, worldOpaque)
		}},
		{"recreate", 20, nil, func(t *testing.T, seed uint64) ([]string, error) {
			return runSegmentSimTrace(t, seed, 300, worldRecreate)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seeds := simSeeds(t)
			if os.Getenv("SIM_SEED") == "" && os.Getenv("SIM_SEEDS") == "" {
				seeds = append(seeds[:tc.seeds:tc.seeds], tc.parted...)
			}
			var diverged []uint64
			for _, seed := range seeds {
				a, errA := tc.run(t, seed)
				b, errB := tc.run(t, seed)
				if len(a) == 0 {
					t.Fatalf("seed %d: the run left no trace", seed)
				}
				if traceSum(a, errA) == traceSum(b, errB) {
					continue
				}
				diverged = append(diverged, seed)
				t.Errorf("seed %d: two runs left different traces: %s", seed, traceDiff(a, b, errA, errB))
			}
			if len(diverged) > 0 {
				t.Errorf("%d of %d seeds replay differently: %v", len(diverged), len(seeds), diverged)
			}
		})
	}
}

// traceSum is the sha256 of a run's trace lines and its error.
func traceSum(trace []string, err error) [sha256.Size]byte {
	tr := simTrace{trace: trace}
	if err != nil {
		tr.trace = append(trace[:len(trace):len(trace)], "error: "+err.Error())
	}
	return tr.sum()
}

// traceDiff names the first line two traces differ in.
func traceDiff(a, b []string, errA, errB error) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d:\n  first:  %s\n  second: %s", i+1, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("one has %d lines, the other %d", len(a), len(b))
	}
	return fmt.Sprintf("the errors differ:\n  first:  %v\n  second: %v", errA, errB)
}
