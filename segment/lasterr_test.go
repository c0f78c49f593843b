package segment

import (
	"errors"
	"testing"
)

// TestLastErrOrder: when both workers of a tag failed, a Take that waited
// in vain reports the range load's error whichever failed last, so the
// message does not depend on which goroutine ran first.
func TestLastErrOrder(t *testing.T) {
	load, mark := errors.New("load failed"), errors.New("state write failed")
	cases := []struct {
		name   string
		failed [2]error
		want   error
	}{
		{"none", [2]error{}, nil},
		{"load only", [2]error{loadWork: load}, load},
		{"state write only", [2]error{markWork: mark}, mark},
		{"both", [2]error{loadWork: load, markWork: mark}, load},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &tagBuf{failed: tc.failed}
			b.mu.Lock()
			defer b.mu.Unlock()
			if got := b.lastErrLocked(); got != tc.want {
				t.Fatalf("lastErrLocked() = %v, want %v", got, tc.want)
			}
		})
	}
}
