package node

import (
	"math"
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/statuspage"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Modes of a node, as reported by GET /clock.
const (
	ModeStandalone = statuspage.ModeStandalone // the page leaves the cluster table out for it
	ModeZooKeeper  = "zookeeper"
)

// ClockInfo is the body of GET /clock: the node's time, fence,
// service state and every check's figures (clockguard.Readings: state,
// reason, detail, since, failing checks, transitions by reason, watcher
// counters, NTP and peer results). The sections of checks that do not run
// are left out (peers and zk in standalone mode).
type ClockInfo struct {
	Mode         string `json:"mode"`
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

// clockInfoBuilder builds the ClockInfo of one node.
type clockInfoBuilder struct {
	mode    string
	policy  string
	tol     time.Duration
	clock   clock.Clock
	gen     *snowflake.Generator
	guard   *health.Guard
	fence   func() int64
	watcher *clockguard.Watcher
	ntp     *clockguard.NTP
	peers   *clockguard.Peers        // nil in standalone mode
	coord   *coordinator.Coordinator // nil in standalone mode
	zk      ZKInfo                   // the static part
	start   *fencing.StartWait
}

func (n *node) newClockInfo() *clockInfoBuilder {
	r := &clockInfoBuilder{
		mode: n.ident.mode, policy: n.cfg.RollbackPolicy, tol: n.cfg.RollbackTolerance, clock: n.clock, gen: n.gen, guard: n.guard, fence: n.keeper.Persisted,
		watcher: n.watcher, ntp: n.ntp, peers: n.peers, coord: n.coord, start: n.startWait,
	}
	if n.coord != nil {
		r.zk = ZKInfo{Cluster: n.cfg.Cluster, NodeKey: n.nodeKey, Advertise: n.advertise, Servers: n.cfg.ZKServers()}
	}
	return r
}

func (r *clockInfoBuilder) info() ClockInfo {
	l := r.gen.Layout()
	rep := ClockInfo{
		Mode: r.mode, WorkerID: r.gen.WorkerID(),
		Layout: l.String(), Epoch: l.Epoch.UTC().Format(time.RFC3339Nano), TimeUnit: l.Unit.String(),
		NowMs: clock.UnixMilli(r.clock), LastIssuedMs: r.gen.LastUnixMilli(), FenceMs: r.fence(),
		Readings: clockguard.BuildReadings(r.guard, r.watcher, r.ntp, r.peers),
	}
	fence := r.gen.FenceUnixMilli()
	st := r.gen.Stats()
	rep.IssueFenceMs = fence
	rep.Rollback = RollbackInfo{
		Policy: r.policy, Tolerance: r.tol.String(),
		IDsAheadMs: float64(r.gen.Behind().Microseconds()) / 1000,
		Borrowed:   st.Borrowed, BorrowExhausted: st.BorrowExhausted,
	}
	if fence != math.MaxInt64 && fence != math.MinInt64 { // set: not "none" or "before the epoch"
		rep.Rollback.HeadroomMs = max(fence-rep.LastIssuedMs, 0)
	}
	if r.coord != nil {
		z := r.zk
		z.Status = r.coord.Status()
		rep.ZK = &z
	}
	if left, h := r.start.PrevHolderWait(); left > 0 {
		rep.PrevHolderFence = &PrevHolderInfo{NodeKey: h.NodeKey, Addr: h.Addr, Token: h.Token, FenceMs: h.FenceMs, LeftMs: left.Milliseconds()}
	}
	return rep
}
