package coordinator

import (
	"fmt"
	"testing"
)

// TestPickFree: the choice among free worker IDs is the node key's and the
// attempt's alone (a simulation's seed replays it), stays in range, and
// spreads: node keys recycling at once seldom pick one ID, and a key's
// retries move on.
func TestPickFree(t *testing.T) {
	for _, n := range []int{1, 2, 4, 1000} {
		seen := map[int]bool{}
		for k := range 64 {
			key := fmt.Sprintf("node-%d", k)
			for attempt := 1; attempt <= 3; attempt++ {
				got := pickFree(key, attempt, n)
				if got < 0 || got >= n {
					t.Fatalf("pickFree(%q, %d, %d) = %d: out of range", key, attempt, n, got)
				}
				if again := pickFree(key, attempt, n); again != got {
					t.Fatalf("pickFree(%q, %d, %d) = %d, then %d: not decided by its arguments", key, attempt, n, got, again)
				}
				seen[got] = true
			}
		}
		if want := min(n, 64); len(seen) < want/2 {
			t.Errorf("n=%d: 64 node keys × 3 attempts picked only %d distinct IDs", n, len(seen))
		}
	}
	moved := 0
	for k := range 64 {
		key := fmt.Sprintf("node-%d", k)
		if pickFree(key, 1, 1000) != pickFree(key, 2, 1000) {
			moved++
		}
	}
	if moved < 60 {
		t.Errorf("only %d of 64 node keys pick another ID on their second attempt", moved)
	}
}
