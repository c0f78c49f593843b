//go:build mutation

package fencing

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
)

// modelSim is the model simulation's name in the mutation table of
// docs/testing.md, whose other rows node/mutation_test.go runs.
const modelSim = "TestSimulation_NoDuplicateUnderSeededFaults"

// modelSeeds is how many seeds make test runs of the model simulation.
const modelSeeds = 2000

// modelMutations are the rows of the mutation table that the model
// simulation catches: rules of this package's functions, which the
// simulation calls as the coordinator and the node do.
var modelMutations = []struct {
	name mutation.Name
	rule string
	seed uint64
}{
	{mutation.S2ClaimForgetsFence, "S2", 1},
	{mutation.S3CacheAnyToken, "S3", 268},
}

// TestMutations breaks each rule of modelMutations and expects the model
// simulation to find a duplicate at the row's seed, or (logged, so the
// table can be brought up to date) at another seed make test runs.
func TestMutations(t *testing.T) {
	for _, row := range modelMutations {
		t.Run(string(row.name), func(t *testing.T) {
			t.Cleanup(mutation.Set(row.name))
			if dup := newSim(row.seed, realRules).run(simSteps); dup != "" {
				t.Logf("%s caught at seed %d: %s", row.name, row.seed, dup)
				return
			}
			for seed := uint64(1); seed <= modelSeeds; seed++ {
				if seed == row.seed {
					continue
				}
				if dup := newSim(seed, realRules).run(simSteps); dup != "" {
					t.Logf("%s caught at seed %d: %s", row.name, seed, dup)
					msg := "the table's seed did not catch " + string(row.name) + "; seed " + strconv.FormatUint(seed, 10) + " did: put it in the table and in docs/testing.md"
					if os.Getenv("MUTATION_STRICT") == "1" {
						t.Fatal(msg)
					}
					t.Log(msg)
					return
				}
			}
			t.Fatalf("none of the %d seeds make test runs catches %s", modelSeeds, row.name)
		})
	}
}

// TestMutationTableDocumented: docs/testing.md has a row for each of
// modelMutations, naming the model simulation and the seed.
func TestMutationTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range modelMutations {
		re := regexp.MustCompile("(?m)^\\| `" + regexp.QuoteMeta(string(row.name)) + "` \\|.*$")
		line := re.FindString(string(doc))
		if line == "" {
			t.Errorf("docs/testing.md has no row for mutation %q", row.name)
			continue
		}
		for _, want := range []string{"| " + row.rule + " |", "`" + modelSim + "`", "| " + strconv.FormatUint(row.seed, 10) + " |"} {
			if !strings.Contains(line, want) {
				t.Errorf("docs/testing.md's row for %q lacks %q: %s", row.name, want, line)
			}
		}
	}
}
