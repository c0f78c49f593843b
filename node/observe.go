package node

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/metrics"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/internal/statuspage"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// Paths of the node's own routes next to the server's built-in API.
const (
	metricsPath = "/metrics" // Prometheus text format
	statusPath  = "/status"  // HTML status page for humans
)

// workerListTTL is how long the status page reuses the cluster's worker
// list read from ZooKeeper (see workerLister).
const workerListTTL = 2 * time.Second

// newMetrics creates the node's metrics: the server's observer (requests,
// issued IDs), rollbacks reported by onIDError and the watcher, and the
// figures of one snapshot of the node per scrape.
func (n *node) newMetrics() error {
	m, err := metrics.New(metrics.Config{
		Snapshot:          n.snapshot,
		RollbackTolerance: n.cfg.RollbackTolerance,
		RollbackPolicy:    n.cfg.RollbackPolicy,
		ProcessMetrics:    true,
	})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	n.metrics = m
	return nil
}

// newStatusPage creates GET /status: this node from its snapshot, and in
// ZooKeeper mode one page of the cluster's workers (?limit=) from a cached
// lister over the coordinator's own session: a view opens no ZooKeeper
// session and reads at most 2×limit+4 znodes, however large the cluster.
func (n *node) newStatusPage() error {
	src := statuspage.SourceFuncs{SelfFunc: n.snapshot}
	if n.coord != nil {
		coord := n.coord
		lister := newWorkerLister(workerListTTL, n.clock.Mono,
			func(ctx context.Context, timeout time.Duration, limit int) (coordinator.WorkerPage, error) {
				ctx, cancel := clock.WithTimeout(ctx, timeout)
				defer cancel()
				return coord.ListWorkerPage(ctx, limit)
			})
		src.WorkerPageFunc = lister.WorkerPage
	}
	page, err := statuspage.New(statuspage.Config{
		Source: src, Clock: n.clock,
		NTPMaxOffset: n.cfg.NTPMaxOffset, PeerMaxOffset: n.cfg.PeerMaxOffset,
		// About three reports, plus how stale the cached list may be.
		MaxReportAge: 3*n.cfg.ReportInterval + workerListTTL,
		Log:          n.log.With().Str("component", "status").Logger(),
		TLS:          n.tls.peerConfig(),
	})
	if err != nil {
		return fmt.Errorf("status page: %w", err)
	}
	n.status = page
	return nil
}

// snapshot reads this node's state from its parts, in one place for
// GET /clock, the status page's own entry and the metrics scrape. It only
// reads what the parts hold (no ZooKeeper or network call); issuing IDs
// never takes one.
func (n *node) snapshot() nodestate.Snapshot {
	key := n.nodeKey
	if key == "" { // standalone: --node-key if set, else the address
		key = n.cfg.nodeKeyFor(n.addr)
	}
	s := nodestate.Snapshot{
		NodeKey: key, Addr: n.addr, Mode: n.ident.mode, Version: n.cfg.Version, BuildVersion: n.cfg.buildVersion(),
		WorkerID: n.gen.WorkerID(), Layout: n.gen.Layout(),
		RollbackPolicy: n.cfg.RollbackPolicy, RollbackTolerance: n.cfg.RollbackTolerance,
		Now:      time.Unix(0, n.clock.WallNanos()),
		Readings: clockguard.BuildReadings(n.guard, n.watcher, n.ntp, n.peers),
		Generator: nodestate.Generator{
			Stats: n.gen.Stats(), LastIssued: n.gen.LastIssued(), IssueFence: n.gen.Fence(), Behind: n.gen.Behind(),
		},
		Fence: n.keeper.Persisted(),
	}
	s.TLSHandshakeFailures = n.tls.failures()
	s.PrevHolderWait, s.PrevHolder = n.startWait.PrevHolderWait()
	if n.coord != nil {
		st := n.coord.Status()
		s.ZK = &st
		s.Cluster, s.ZKServers = n.cfg.Cluster, n.cfg.zkServers()
	}
	if n.segments != nil {
		s.Segments = n.segments.Status()
		if s.Segments == nil {
			s.Segments = []segment.TagStatus{}
		}
		s.PossiblyLost = n.segments.PossiblyLost()
	}
	return s
}

// ownRoutes are the routes the node adds to the server's API.
func (n *node) ownRoutes() map[string]fasthttp.RequestHandler {
	return map[string]fasthttp.RequestHandler{
		metricsPath: n.metrics.Handler(),
		statusPath:  n.status.Handler(),
	}
}

// displayAddr is the address the status page shows for this node: the
// advertised one in ZooKeeper mode; in standalone mode --advertise, or the
// address listened on (with --listen's host when it is a concrete one).
func (n *node) displayAddr(listening net.Addr) string {
	if n.advertise != "" {
		return n.advertise
	}
	if a, err := n.cfg.advertiseAddr(listening); err == nil {
		return a
	}
	return listening.String()
}
