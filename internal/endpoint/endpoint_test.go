package endpoint

import "testing"

// TestEndpointLabels: every endpoint has a label of its own, and one beyond
// the set is "other".
func TestEndpointLabels(t *testing.T) {
	seen := map[string]bool{}
	for e, label := range Labels {
		if label == "" || seen[label] {
			t.Errorf("endpoint %d: label %q empty or taken", e, label)
		}
		seen[label] = true
		if Endpoint(e).String() != label {
			t.Errorf("Endpoint(%d).String() = %q, want %q", e, Endpoint(e).String(), label)
		}
	}
	for _, e := range []Endpoint{Count, Count + 1, 255} {
		if e.String() != "other" {
			t.Errorf("Endpoint(%d).String() = %q, want other", e, e.String())
		}
	}
}
