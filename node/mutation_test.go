//go:build mutation

package node

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
)

// The mutation table: each row breaks one safety rule of docs/fencing.md or
// docs/segments.md (a mutation.Name, asked by the shipped code where the
// rule lives) and names the simulation of make test that catches it, the
// seed it is caught at and what the failure says. docs/testing.md carries
// the same table; TestMutationTableDocumented keeps the two equal.
//
// Run one row: go test -tags mutation -run 'TestMutations/<name>' ./node/
// (SIM_SEED=N runs the row's simulation at another seed).

// mutationSim is a simulation make test runs, by name: how to run one seed
// of it and how many seeds make test runs.
type mutationSim struct {
	run   func(t *testing.T, seed uint64) error
	seeds uint64
}

// mutationSims are the simulations a row may name.
var mutationSims = map[string]mutationSim{
	"TestSimulation_Snowflake": {func(t *testing.T, seed uint64) error {
		_, err := runSnowSim(t, seed, 300, snowMixed)
		return err
	}, 200},
	"TestSimulation_SnowflakeBorrow": {func(t *testing.T, seed uint64) error {
		_, err := runSnowSim(t, seed, 300, snowBorrow)
		return err
	}, 25},
	"TestSimulation_SnowflakePaths": {func(t *testing.T, seed uint64) error {
		_, err := runPathsSim(t, seed, 300)
		return err
	}, 40},
	"TestSimulation_SnowflakeRules": {func(t *testing.T, seed uint64) error {
		_, err := runRulesSim(t, seed)
		return err
	}, rulesSeeds},
	"TestSimulation_Segments": {func(t *testing.T, seed uint64) error {
		return runSegmentSim(t, seed, 300, worldPlain)
	}, 1000},
	"TestSimulation_SegmentsOpaque": {func(t *testing.T, seed uint64) error {
		return runSegmentSim(t, seed, 300, worldOpaque)
	}, 200},
	"TestSimulation_SegmentsTagRecreated": {func(t *testing.T, seed uint64) error {
		return runSegmentSim(t, seed, 300, worldRecreate)
	}, 200},
}

// mutationRow is one row of the table.
type mutationRow struct {
	name mutation.Name
	rule string // the rule's label in docs/fencing.md or docs/segments.md
	sim  string // a key of mutationSims
	seed uint64 // the seed that catches it
	want string // regexp: what the simulation's failure says (its first line, not the trace)
}

var mutationTable = []mutationRow{
	// Segment mode (docs/segments.md).
	{mutation.AllocUnversioned, "R1", "TestSimulation_Segments", 2, `issued twice|returned range .* holds ID|returned ranges .* overlap|more IDs issued`},
	{mutation.IssueAboveMark, "R2", "TestSimulation_Segments", 2, `issued twice`},
	{mutation.ReturnBeforeFileWrite, "R3", "TestSimulation_Segments", 1, `issued twice|returned range .* holds ID|state file still lists`},
	{mutation.StateFileOfOtherZooKeeper, "R4", "TestSimulation_Segments", 2, `issued twice|returned range .* holds ID|more IDs issued`},
	{mutation.ReturnRetriedBlindly, "R5", "TestSimulation_Segments", 320, `issued twice|returned range .* holds ID|returned ranges .* overlap`},
	{mutation.WentBackUnchecked, "R6", "TestSimulation_Segments", 13, `issued twice|returned range .* holds ID|more IDs issued`},
	{mutation.DeleteUnpolled, "R7", "TestSimulation_SegmentsTagRecreated", 3, `after the tag was deleted it still holds`},
	{mutation.TagTombstoneIgnored, "R8", "TestSimulation_SegmentsTagRecreated", 1, `of the tag created again`},
	{mutation.SetMaxUnversioned, "set-max", "TestSimulation_Segments", 20, `issued twice|set-max skipped|more IDs issued`},
	// Segment mode: a forgotten take (docs/segments.md R6).
	{mutation.TakeUnrecorded, "R6", "TestSimulation_Segments", 58, `issued twice|returned range .* holds ID|more IDs issued`},
	// The paths of node/simpaths_test.go: re-claim, retire, worker-ID
	// range, correction.
	{mutation.ReclaimSkipsFloor, "S4", "TestSimulation_SnowflakePaths", 1, "issued twice"},
	{mutation.FenceWriterSkipsFloor, "S4", "TestSimulation_SnowflakePaths", 1, "issued twice"},
	{mutation.RetiredFenceDropped, "retire", "TestSimulation_SnowflakePaths", 3, "issued twice"},
	{mutation.RangeIgnored, "range", "TestSimulation_SnowflakePaths", 5, `outside the cluster.s worker-ID range|recycling refused: .*malformed`},
	{mutation.CorrectionIsAJump, "correction", "TestSimulation_SnowflakePaths", 1, "held as a jump"},
	// The fencing rules of docs/fencing.md on the snowflake simulation's
	// paths.
	{mutation.S1AdoptAnyWrite, "S1", "TestSimulation_Snowflake", 37, `issued twice`},
	{mutation.L2RestartIgnoresFence, "L2", "TestSimulation_Snowflake", 16, `issued twice`},
	{mutation.BorrowPastFence, "borrow", "TestSimulation_SnowflakeBorrow", 5, `issued twice`},
	// The rule scenarios of node/simrules_test.go: the faults the random
	// schedules did not reach.
	{mutation.S1RenewalUnversioned, "S1", "TestSimulation_SnowflakeRules", 1, `issued twice`},
	{mutation.S2StopLowersZooKeeperFirst, "S2", "TestSimulation_SnowflakeRules", 2, `issued twice`},
	{mutation.L1FenceBeforePersist, "L1", "TestSimulation_SnowflakeRules", 3, `issued twice`},
	{mutation.TombstoneFloorSkipped, "tombstone", "TestSimulation_SnowflakeRules", 4, `issued twice`},
}

// TestMutations breaks each rule of the table in turn and expects the
// simulation to fail at the table's seed. A row whose seed does not catch
// it (the simulation changed, or a replay parted from the recorded run:
// docs/testing.md, Replaying a seed) is searched over the seeds make test
// runs: caught there, the rule is defended and the test logs the seed to
// put in the table (MUTATION_STRICT=1 makes that a failure, for refreshing
// the table); caught nowhere, the rule is not defended by make test's
// simulations and the test fails.
func TestMutations(t *testing.T) {
	if testsupport.RaceEnabled {
		t.Skip("the simulations run without -race in make test")
	}
	strict := os.Getenv("MUTATION_STRICT") == "1"
	for _, row := range mutationTable {
		t.Run(string(row.name), func(t *testing.T) {
			sim, ok := mutationSims[row.sim]
			if !ok {
				t.Fatalf("row names no simulation make test runs: %q", row.sim)
			}
			if row.seed < 1 || row.seed > sim.seeds {
				t.Fatalf("seed %d is not among the %d seeds make test runs of %s", row.seed, sim.seeds, row.sim)
			}
			want := regexp.MustCompile(row.want)
			restore := mutation.Set(row.name)
			t.Cleanup(restore)
			seed := row.seed
			if s := os.Getenv("SIM_SEED"); s != "" {
				v, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					t.Fatalf("SIM_SEED=%q: %v", s, err)
				}
				seed = v
			}
			caught := func(seed uint64) bool {
				err := sim.run(t, seed)
				if err == nil {
					return false
				}
				if !want.MatchString(firstLine(err)) {
					// The broken rule showed otherwise (or another fault
					// did): not the row's catch; the search goes on.
					t.Logf("seed %d: the simulation failed, but not as %q: %s", seed, row.want, firstLine(err))
					return false
				}
				t.Logf("%s caught at seed %d, %s", row.name, seed, firstLine(err))
				return true
			}
			if caught(seed) {
				return
			}
			if os.Getenv("SIM_SEED") != "" {
				t.Fatalf("seed %d did not catch %s", seed, row.name)
			}
			for s := uint64(1); s <= sim.seeds; s++ {
				if s == row.seed || !caught(s) {
					continue
				}
				msg := fmt.Sprintf("the table's seed %d did not catch %s this run; seed %d did: if it stays so, put it in the table and in docs/testing.md",
					row.seed, row.name, s)
				if strict {
					t.Fatal(msg)
				}
				t.Log(msg)
				return
			}
			t.Fatalf("none of the %d seeds make test runs of %s catches %s: the rule is not defended", sim.seeds, row.sim, row.name)
		})
	}
}

// TestMutationTableDocumented: docs/testing.md has a row for each mutation
// of the table, with its name, rule, simulation and seed, and no other.
func TestMutationTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.Contains(line, "`TestSimulation_NoDuplicateUnderSeededFaults`") || strings.Contains(line, "`TestTakeWithToken_RotatedWhileCutOff`") ||
			strings.Contains(line, "`TestRecyclingManyAtOnceCostsAboutOneScanEach`") || strings.Contains(line, "`TestRecycleFromOutdatedScanOfANamedIDFails`") ||
			strings.Contains(line, "`TestRecycleInsideAScanIsSeen`") {
			continue // the model simulation's rows (fencing/mutation_test.go), the token scenario's (segment/mutation_test.go), recycling's (coordinator/mutation_test.go)
		}
		if m := regexp.MustCompile("^\\| `([a-z0-9-]+)` \\|").FindStringSubmatch(line); m != nil {
			rows[m[1]] = line
		}
	}
	for _, row := range mutationTable {
		line, ok := rows[string(row.name)]
		if !ok {
			t.Errorf("docs/testing.md has no row for mutation %q", row.name)
			continue
		}
		delete(rows, string(row.name))
		for _, want := range []string{"| " + row.rule + " |", "`" + row.sim + "`", fmt.Sprintf("| %d |", row.seed)} {
			if !strings.Contains(line, want) {
				t.Errorf("docs/testing.md's row for %q lacks %q: %s", row.name, want, line)
			}
		}
	}
	for name := range rows {
		t.Errorf("docs/testing.md lists mutation %q, which the table does not have", name)
	}
}

func firstLine(err error) string { return strings.SplitN(err.Error(), "\n", 2)[0] }

// Reset tags (docs/segments.md R9): their simulation, and the row that
// starts a period twice.
func init() {
	mutationSims["TestSimulation_SegmentsReset"] = mutationSim{func(t *testing.T, seed uint64) error {
		return runSegmentSim(t, seed, 300, worldReset)
	}, 200}
	mutationTable = append(mutationTable,
		mutationRow{mutation.PeriodStartedTwice, "R9", "TestSimulation_SegmentsReset", 5, `number \d+ of period \S+ \(\d+\) handed out twice`},
		mutationRow{mutation.RepairForgetsPeriods, "R9", "TestSimulation_SegmentsReset", 1, `number \d+ of period \S+ \(\d+\) handed out twice`})
}
