package node

import (
	"time"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
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
	clockguard.Readings
	ZK *ZKInfo `json:"zk,omitempty"`
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
	clock   clock.Clock
	gen     *snowflake.Generator
	guard   *clockguard.Guard
	fence   func() int64
	watcher *clockguard.Watcher
	ntp     *clockguard.NTP
	peers   *clockguard.Peers        // nil in standalone mode
	coord   *coordinator.Coordinator // nil in standalone mode
	zk      ZKInfo                   // the static part
}

func (n *node) newClockInfo() *clockInfoBuilder {
	r := &clockInfoBuilder{
		mode: n.ident.mode, clock: n.clock, gen: n.gen, guard: n.guard, fence: n.keeper.Persisted,
		watcher: n.watcher, ntp: n.ntp, peers: n.peers, coord: n.coord,
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
	if r.coord != nil {
		z := r.zk
		z.Status = r.coord.Status()
		rep.ZK = &z
	}
	return rep
}
