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
