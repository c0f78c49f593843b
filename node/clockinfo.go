package node

import (
	"math"
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Modes of a node, as reported by GET /clock.
const (
	modeStandalone = nodestate.ModeStandalone // the status page leaves the cluster table out for it
	modeZooKeeper  = nodestate.ModeZooKeeper
)

// ClockInfo is the body of GET /clock: the node's time, fence,
// service state and every check's figures (clockguard.Readings: state,
// reason, detail, since, failing checks, transitions by reason, watcher
// counters, NTP and peer results). The sections of checks that do not run
// are left out (peers and zk in standalone mode).
type ClockInfo struct {
	Mode         string `json:"mode"`
	Version      string `json:"version,omitempty"` // the version the node was built as (-X main.version)
	WorkerID     int64  `json:"worker_id"`
	Layout       string `json:"layout"`
	Epoch        string `json:"epoch"`
	TimeUnit     string `json:"time_unit"`
	NowMs        int64  `json:"now_ms"`
	LastIssuedMs int64  `json:"last_issued_ms"` // start of the last issued tick (or of the tick the node started after)
	FenceMs      int64  `json:"fence_ms"`       // fence last persisted locally
	// IssueFenceMs is the fence the generator is held to: the lower of the
	// local fence and, in ZooKeeper mode, the fence ZooKeeper acknowledged.
	IssueFenceMs int64        `json:"issue_fence_ms"`
	Rollback     RollbackInfo `json:"rollback"`
	clockguard.Readings
	ZK *ZKInfo `json:"zk,omitempty"`
	// PrevHolderFence is there while the node waits at start for the
	// previous holder's ZooKeeper fence (reason prev_holder_fence).
	PrevHolderFence *PrevHolderInfo `json:"prev_holder_fence,omitempty"`
}

// PrevHolderInfo is the prev_holder_fence section of GET /clock: whose
// ZooKeeper fence the node waits for, the fence and the time left.
type PrevHolderInfo struct {
	NodeKey string `json:"node_key"` // "" when unknown
	Addr    string `json:"addr"`     // "" when unknown
	Token   string `json:"token"`    // "" for a holder from before tokens
	FenceMs int64  `json:"fence_ms"`
	LeftMs  int64  `json:"left_ms"`
}

// RollbackInfo is the rollback section of GET /clock: the policy and how
// far borrowing through a rollback has gone.
type RollbackInfo struct {
	Policy    string `json:"policy"`    // --rollback-policy: leave or borrow
	Tolerance string `json:"tolerance"` // --rollback-tolerance
	// IDsAheadMs is how far the last issued ID's time is ahead of the
	// clock (0 when it is not): the headroom used so far.
	IDsAheadMs float64 `json:"ids_ahead_ms"`
	// HeadroomMs is IssueFenceMs minus the last issued tick: how far the
	// IDs may still run ahead before borrow_exhausted.
	HeadroomMs int64 `json:"headroom_ms"`
	// Borrowed counts the IDs reserved while the clock was behind the last
	// issued ID beyond the tolerance; BorrowExhausted the requests refused
	// at the fence while borrowing.
	Borrowed        int64 `json:"borrowed_ids"`
	BorrowExhausted int64 `json:"borrow_exhausted_refusals"`
}

// ZKInfo is the ZooKeeper section of GET /clock: who this node is in the
// cluster and the coordinator's state (session, lease, last report, fence
// in ZooKeeper).
type ZKInfo struct {
	Cluster   string   `json:"cluster"`
	NodeKey   string   `json:"node_key"`
	Advertise string   `json:"advertise"`
	Servers   []string `json:"servers"`
	coordinator.Status
}

// clockInfo renders a snapshot of the node as the body of GET /clock.
func clockInfo(s nodestate.Snapshot) ClockInfo {
	l, g := s.Layout, s.Generator
	rep := ClockInfo{
		Mode: s.Mode, Version: s.BuildVersion, WorkerID: s.WorkerID,
		Layout: l.String(), Epoch: l.Epoch.UTC().Format(time.RFC3339Nano), TimeUnit: l.Unit.String(),
		NowMs: s.Now.UnixNano() / int64(time.Millisecond), LastIssuedMs: int64(g.LastIssued), FenceMs: int64(s.Fence),
		IssueFenceMs: int64(g.IssueFence),
		Rollback: RollbackInfo{
			Policy: s.RollbackPolicy, Tolerance: s.RollbackTolerance.String(),
			IDsAheadMs: float64(g.Behind.Microseconds()) / 1000,
			Borrowed:   g.Stats.Borrowed, BorrowExhausted: g.Stats.BorrowExhausted,
		},
		Readings: s.Readings,
	}
	if fence := g.IssueFence; fence != snowflake.NoFence && fence != math.MinInt64 { // set: not "none" or "before the epoch"
		rep.Rollback.HeadroomMs = max(fence.Sub(g.LastIssued).Milliseconds(), 0)
	}
	if s.ZK != nil {
		rep.ZK = &ZKInfo{Cluster: s.Cluster, NodeKey: s.NodeKey, Advertise: s.Addr, Servers: s.ZKServers, Status: *s.ZK}
	}
	if left, h := s.PrevHolderWait, s.PrevHolder; left > 0 {
		rep.PrevHolderFence = &PrevHolderInfo{NodeKey: h.NodeKey, Addr: h.Addr, Token: h.Token, FenceMs: int64(h.Fence), LeftMs: left.Milliseconds()}
	}
	return rep
}
