//go:build mutation

package coordinator

import (
	"regexp"
	"testing"
	"testing/synctest"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
)

// TestMutations_Recycling breaks the rules of recycling at scale in turn and
// expects the scenario that defends each to catch it. docs/testing.md's
// mutation table has the rows.
func TestMutations_Recycling(t *testing.T) {
	cases := []struct {
		name     mutation.Name
		scenario func(t *testing.T) error
		want     string
	}{
		{mutation.ReapHolders, recycleManyAtOnce, `below its owner's fence|which held worker ID \d+, was reaped`},
		{mutation.RecycleEvictUnversioned, recycleFromOutdatedScanOfANamedID, `two forever znodes name worker ID`},
		{mutation.RecycleNamedUnmarked, recycleInsideAScan, `two forever znodes name worker ID`},
	}
	for _, tc := range cases {
		t.Run(string(tc.name), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t.Cleanup(mutation.Set(tc.name))
				err := tc.scenario(t)
				if err == nil || !regexp.MustCompile(tc.want).MatchString(err.Error()) {
					t.Fatalf("with %s the scenario said %v; want %q", tc.name, err, tc.want)
				}
				t.Logf("%s caught: %v", tc.name, err)
			})
		})
	}
}
