package node

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/metrics"
	"codeberg.org/snowflaked/snowflaked/internal/statuspage"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// Paths of the node's own routes next to the server's built-in API.
const (
	MetricsPath = "/metrics" // Prometheus text format
	StatusPath  = "/status"  // HTML status page for humans
)

// workerListTTL is how long the status page reuses the cluster's worker
// list read from ZooKeeper (see workerLister).
const workerListTTL = 2 * time.Second

// newMetrics creates the node's metrics: the server's observer (requests,
// issued IDs), rollbacks reported by onIDError and the watcher, and the
// figures read at scrape time from the generator, guard, clock, persisted
// fence, watcher, NTP and peer checks and the coordinator (the last two
// are nil in standalone mode and left out).
func (n *node) newMetrics() error {
	src := metrics.Sources{
		Generator: n.gen, Guard: n.guard, Clock: n.clock, Fence: n.keeper.Persisted,
		Watcher: n.watcher, NTP: n.ntp, Peers: n.peers, ZK: n.coord,
	}
	if n.segments != nil {
		src.Segments = n.segments
	}
	if n.coord != nil {
		src.PrevHolderWait = func() time.Duration {
			left, _ := n.startWait.PrevHolderWait()
			return left
		}
	}
	m, err := metrics.New(metrics.Config{
		Sources:           src,
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

// newStatusPage creates GET /status: this node from its own parts, and in
// ZooKeeper mode the cluster's workers from a cached lister.
func (n *node) newStatusPage() error {
	src := statuspage.SourceFuncs{SelfFunc: n.statusSelf}
	if n.coord != nil {
		servers, cluster, auth := n.cfg.ZKServers(), n.cfg.Cluster, n.cfg.ZKAuth
		lister := newWorkerLister(workerListTTL, n.clock.Mono,
			func(ctx context.Context, timeout time.Duration) ([]coordinator.WorkerInfo, error) {
				return coordinator.ListWorkers(ctx, servers, cluster, auth, timeout)
			})
		src.WorkersFunc = lister.Workers
	}
	page, err := statuspage.New(statuspage.Config{
		Source: src, Clock: n.clock,
		NTPMaxOffset: n.cfg.NTPMaxOffset, PeerMaxOffset: n.cfg.PeerMaxOffset,
		// About three reports, plus how stale the cached list may be.
		MaxReportAge: 3*n.cfg.ReportInterval + workerListTTL,
		Log:          n.log.With().Str("component", "status").Logger(),
	})
	if err != nil {
		return fmt.Errorf("status page: %w", err)
	}
	n.status = page
	return nil
}

// statusSelf describes this node for the status page; it only reads
// snapshots (no ZooKeeper or network call).
func (n *node) statusSelf() statuspage.Self {
	ntp := n.ntp.Snapshot()
	key := n.nodeKey
	if key == "" { // standalone: --node-key if set, else the address
		key = n.cfg.NodeKeyFor(n.addr)
	}
	s := statuspage.Self{
		NodeKey: key, Addr: n.addr, Mode: n.ident.mode, WorkerID: n.ident.entry.WorkerID,
		Version: n.cfg.Version, Layout: n.gen.Layout().Describe(),
		Status: n.guard.Status(), FenceMs: n.keeper.Persisted(), NTP: &ntp,
	}
	if n.coord != nil {
		st := n.coord.Status()
		s.ZK = &st
		s.Cluster = n.cfg.Cluster
	}
	if n.segments != nil {
		s.Segments = n.segments.Status()
		if s.Segments == nil {
			s.Segments = []segment.TagStatus{}
		}
	}
	return s
}

// ownRoutes are the routes the node adds to the server's API.
func (n *node) ownRoutes() map[string]fasthttp.RequestHandler {
	return map[string]fasthttp.RequestHandler{
		MetricsPath: n.metrics.Handler(),
		StatusPath:  n.status.Handler(),
	}
}

// displayAddr is the address the status page shows for this node: the
// advertised one in ZooKeeper mode; in standalone mode --advertise, or the
// address listened on (with --listen's host when it is a concrete one).
func (n *node) displayAddr(listening net.Addr) string {
	if n.advertise != "" {
		return n.advertise
	}
	if a, err := n.cfg.AdvertiseAddr(listening); err == nil {
		return a
	}
	return listening.String()
}
