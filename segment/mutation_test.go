//go:build mutation

package segment

import (
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
)

// TestMutations_TokenRevocation breaks the token stale limit (the bound on
// honouring hashes not read again) and expects the rotation-during-a-
// partition scenario of TestTakeWithToken_RotatedWhileCutOff to catch it:
// the old token still served past the limit. docs/testing.md's mutation
// table has the row.
func TestMutations_TokenRevocation(t *testing.T) {
	t.Cleanup(mutation.Set(mutation.TokenStaleUnbounded))
	err := rotatedWhileCutOff(t)
	if err == nil || !strings.Contains(err.Error(), "still served") {
		t.Fatalf("with %s the scenario said %v; want the old token still served past the limit", mutation.TokenStaleUnbounded, err)
	}
	t.Logf("%s caught: %v", mutation.TokenStaleUnbounded, err)
}

// TestMutations_PeriodStartedTwice writes a reset tag's period base again
// when a second node starts a period the record has, and expects the
// midnight scenario of TestResetTagAcrossMidnight to catch it: a number of
// the new day handed out twice.
func TestMutations_PeriodStartedTwice(t *testing.T) {
	t.Cleanup(mutation.Set(mutation.PeriodStartedTwice))
	err := acrossMidnight(t)
	if err == nil || !strings.Contains(err.Error(), "which") {
		t.Fatalf("with %s the scenario said %v; want a number handed out twice", mutation.PeriodStartedTwice, err)
	}
	t.Logf("%s caught: %v", mutation.PeriodStartedTwice, err)
}
