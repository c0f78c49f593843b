//go:build !mutation

package mutation

import "testing"

// TestNothingBreaksWithoutTheTag: a build without the mutation tag breaks
// no rule, whatever name is asked.
func TestNothingBreaksWithoutTheTag(t *testing.T) {
	if enabled {
		t.Fatal("Enabled in a build without the mutation tag")
	}
	for _, n := range []Name{none, "S4-reclaim-skips-floor", "anything"} {
		if Broken(n) {
			t.Fatalf("Broken(%q) in a build without the mutation tag", n)
		}
	}
}
