package docs

import (
	"strings"
	"testing"
)

// What the docs say a restart after kill -9 waits for matches what the
// code does (docs/fencing.md, S3; shown by tests/e2e's
// TestIntegration_ClusterRestartAfterKill9WaitsOnlyForLeaseAndFence): on
// the same disk the dead session's lease is removed at once and only the
// cache file's fence is waited for; only a node on another disk waits for
// ZooKeeper to end the dead session. No document promises a lease wait of
// its own after a restart on the same disk.
func TestKill9RestartWaitsAsDocumented(t *testing.T) {
	runbook := section(t, doc(t, docOperations), secRunbook)
	var startingRow string
	for _, row := range tableRows(runbook) {
		if len(row) > 3 && row[0] == "`starting`" {
			startingRow = strings.Join(row, " | ")
		}
	}
	for _, tc := range []struct {
		name, text string
		want       []string // each must appear
		wrong      []string // none may appear
	}{
		{"operations.md's runbook row starting", startingRow,
			[]string{"same disk: no lease wait", "`--fence-ahead`", "TestIntegration_ClusterRestartAfterKill9WaitsOnlyForLeaseAndFence"},
			[]string{"session timeout + 5 s"}},
		{"operations.md's runbook", runbook,
			[]string{"A restart on the same disk does not wait for it"},
			[]string{"session timeout + 5 s", "(15 s)"}},
		{"README.md", readme(t),
			[]string{"removes its dead session's lease at once"},
			[]string{"waits for its old ZooKeeper session to expire"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.text == "" {
				t.Fatal("not found")
			}
			for _, w := range tc.want {
				if !strings.Contains(tc.text, w) {
					t.Errorf("lacks %q", w)
				}
			}
			for _, w := range tc.wrong {
				if strings.Contains(tc.text, w) {
					t.Errorf("says %q: a restart on the same disk removes the dead session's lease at once", w)
				}
			}
		})
	}
}
