package node

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// clockSnapshot is a standalone node's snapshot with every figure set.
func clockSnapshot() nodestate.Snapshot {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return nodestate.Snapshot{
		NodeKey: "127.0.0.1:8080", Addr: "127.0.0.1:8080", Mode: nodestate.ModeStandalone, Version: "vTEST (go1.26)", BuildVersion: "vTEST",
		WorkerID: 9, Layout: snowflake.DefaultLayout(), RollbackPolicy: "borrow", RollbackTolerance: 5 * time.Millisecond,
		Now: now.Add(1500 * time.Microsecond),
		Readings: clockguard.Readings{
			State: health.OutOfService, Reason: health.ReasonNTPOffset, Detail: "offset 2s", Since: now,
			Failing:     map[health.Reason]string{health.ReasonNTPOffset: "offset 2s"},
			Transitions: map[string]int64{health.TransitionsInServiceKey: 1, "ntp_offset": 1},
			Watcher:     &clockguard.WatcherStats{Checks: 3},
		},
		Generator: nodestate.Generator{
			Stats:      snowflake.Stats{Borrowed: 12, BorrowExhausted: 2, Rollbacks: 1},
			LastIssued: snowflake.UnixMilliOf(now) + 2, IssueFence: snowflake.UnixMilliOf(now) + 3000, Behind: 1250 * time.Microsecond,
		},
		Fence: snowflake.UnixMilliOf(now) + 4000,
	}
}

// TestClockInfo: GET /clock's body is rendered from a snapshot alone, field
// by field, and its JSON keeps the wire format.
func TestClockInfo(t *testing.T) {
	zk := func(s *nodestate.Snapshot) {
		s.Mode, s.NodeKey, s.Addr, s.Cluster = nodestate.ModeZooKeeper, "node-a", "10.0.0.1:8080", "prod"
		s.ZKServers = []string{"zk1:2181", "zk2:2181"}
		s.ZK = &coordinator.Status{WorkerID: 9, Connected: true, LeaseHeld: true, Reports: 4}
	}
	tests := []struct {
		name         string
		mod          func(*nodestate.Snapshot)
		wantHeadroom int64
		wantZK       *ZKInfo
		wantPrev     *PrevHolderInfo
	}{
		{"standalone", nil, 2998, nil, nil},
		{"no fence", func(s *nodestate.Snapshot) { s.Generator.IssueFence = snowflake.NoFence }, 0, nil, nil},
		{"fence before the epoch", func(s *nodestate.Snapshot) { s.Generator.IssueFence = math.MinInt64 }, 0, nil, nil},
		{"fence behind the last ID", func(s *nodestate.Snapshot) { s.Generator.IssueFence = s.Generator.LastIssued - 5 }, 0, nil, nil},
		{"waiting for the previous holder's fence", func(s *nodestate.Snapshot) {
			s.PrevHolderWait, s.PrevHolder = 1500*time.Millisecond, fencing.PrevHolder{NodeKey: "old", Addr: "10.0.0.2:8080", Token: "t1", Fence: 77}
		}, 2998, nil, &PrevHolderInfo{NodeKey: "old", Addr: "10.0.0.2:8080", Token: "t1", FenceMs: 77, LeftMs: 1500}},
		{"zookeeper", zk, 2998, &ZKInfo{Cluster: "prod", NodeKey: "node-a", Advertise: "10.0.0.1:8080", Servers: []string{"zk1:2181", "zk2:2181"},
			Status: coordinator.Status{WorkerID: 9, Connected: true, LeaseHeld: true, Reports: 4}}, nil},
		{"zookeeper, no wait left", func(s *nodestate.Snapshot) {
			zk(s)
			s.PrevHolder = fencing.PrevHolder{NodeKey: "old", Fence: 77}
		}, 2998, &ZKInfo{Cluster: "prod", NodeKey: "node-a", Advertise: "10.0.0.1:8080", Servers: []string{"zk1:2181", "zk2:2181"},
			Status: coordinator.Status{WorkerID: 9, Connected: true, LeaseHeld: true, Reports: 4}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := clockSnapshot()
			if tc.mod != nil {
				tc.mod(&s)
			}
			got := clockInfo(s)
			want := ClockInfo{
				Mode: s.Mode, Version: "vTEST", WorkerID: 9, Layout: "41/10/12", Epoch: "2024-01-01T00:00:00Z", TimeUnit: "1ms",
				NowMs: s.Now.UnixMilli(), LastIssuedMs: int64(s.Generator.LastIssued), FenceMs: int64(s.Fence), IssueFenceMs: int64(s.Generator.IssueFence),
				Rollback: RollbackInfo{Policy: "borrow", Tolerance: "5ms", IDsAheadMs: 1.25, HeadroomMs: tc.wantHeadroom, Borrowed: 12, BorrowExhausted: 2},
				Readings: s.Readings, ZK: tc.wantZK, PrevHolderFence: tc.wantPrev,
			}
			gotJSON, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			wantJSON, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("clockInfo =\n%s\nwant\n%s", gotJSON, wantJSON)
			}
		})
	}
	// The wire format of the standalone case, key by key.
	b, err := json.Marshal(clockInfo(clockSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"mode":"standalone","version":"vTEST","worker_id":9,"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms",` +
		`"now_ms":1772366400001,"last_issued_ms":1772366400002,"fence_ms":1772366404000,"issue_fence_ms":1772366403000,` +
		`"rollback":{"policy":"borrow","tolerance":"5ms","ids_ahead_ms":1.25,"headroom_ms":2998,"borrowed_ids":12,"borrow_exhausted_refusals":2},` +
		`"state":"out_of_service","reason":"ntp_offset","detail":"offset 2s","since":"2026-03-01T12:00:00Z",` +
		`"failing":{"ntp_offset":"offset 2s"},"transitions":{"in_service":1,"ntp_offset":1},` +
		`"watcher":{"checks":3,"backward_steps":0,"forward_steps":0,"largest_backward_step_ns":0,"largest_forward_step_ns":0,"last_step_ns":0}}`
	if string(b) != want {
		t.Errorf("GET /clock body\n%s\nwant\n%s", b, want)
	}
}

// TestBuildVersion: the version GET /clock, ZooKeeper and
// snowflaked_build_info carry is the first word of the version the main
// sets.
func TestBuildVersion(t *testing.T) {
	tests := []struct{ version, want string }{
		{"v1.2.3 (go1.26.1)", "v1.2.3"},
		{"v1.2.3-4-gabcdef0-dirty (go1.26.1) chaos build: fault injection enabled, not for production", "v1.2.3-4-gabcdef0-dirty"},
		{"dev", "dev"},
		{"", ""},
	}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			c := Config{Version: tc.version}
			if got := c.buildVersion(); got != tc.want {
				t.Errorf("buildVersion of %q = %q, want %q", tc.version, got, tc.want)
			}
		})
	}
}
