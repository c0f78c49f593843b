package statuspage

import (
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestZKFenceCell(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name     string
		fence    int64
		running  bool
		wantText string
		wantOver bool
	}{
		{"ahead", now.Add(27300 * time.Millisecond).UnixMilli(), true, "+27.3s", false},
		{"passed, running: issues nothing", now.Add(-3 * time.Second).UnixMilli(), true, "passed 3s ago", true},
		{"passed, stopped: expected", now.Add(-time.Hour).UnixMilli(), false, "passed 1h0m0s ago", false},
		{"none", 0, false, "none", false},
	}
	for _, tc := range tests {
		c := zkFenceCell(snowflake.UnixMilli(tc.fence), now, tc.running)
		if c.Text != tc.wantText || c.Over != tc.wantOver {
			t.Errorf("%s: %+v, want %q over=%v", tc.name, c, tc.wantText, tc.wantOver)
		}
	}
}

func TestSelfViewZKFence(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := &Page{}
	tests := []struct {
		name string
		zk   coordinator.Status
		want string
	}{
		{"ahead", coordinator.Status{ZKFence: snowflake.UnixMilliOf(now.Add(20 * time.Second)), ZKFenceHeadroomMs: 20_000, ZKFenceAheadMs: 30_000},
			"03:04:25.000 UTC, 20s ahead of the clock (renewed to now + 30s"},
		{"passed", coordinator.Status{ZKFence: snowflake.UnixMilliOf(now.Add(-2 * time.Second)), ZKFenceHeadroomMs: -2000, ZKFenceAheadMs: 30_000},
			"passed 2s ago: no IDs until a renewal"},
		{"none", coordinator.Status{}, "none acknowledged"},
	}
	for _, tc := range tests {
		zk := tc.zk
		v := p.selfView(nodestate.Snapshot{ZK: &zk}, now)
		if !strings.Contains(v.ZKFence, tc.want) {
			t.Errorf("%s: %q does not contain %q", tc.name, v.ZKFence, tc.want)
		}
	}
}
