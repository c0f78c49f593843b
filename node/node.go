// Package node runs one snowflaked node: it decides the node's identity,
// builds the generator, registers the clock-guard checks, runs the
// background loops (fence keeper, rollback recovery, start gate) and the
// HTTP server, and stops gracefully, leaving the exact last issued time as
// the fence so a clean restart waits for nothing.
package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/fencing"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/metrics"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/statuspage"
	"codeberg.org/snowflaked/snowflaked/internal/tlsfiles"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/server"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// node is one running node; Run builds it step by step.
type node struct {
	cfg    Config
	log    zerolog.Logger
	clock  clock.Clock
	layout snowflake.Layout
	routes map[string]fasthttp.RequestHandler
	seams  seams // what tests replace (zero in production)
	// timers is Run's context without its cancel: the stop's deadlines,
	// which outlive Run's context, arm their timers under it (a
	// simulation's clock.Schedule reaches them).
	timers context.Context
	addr   string // shown on the status page (the advertised address in ZooKeeper mode)
	// chaosDisk decorates the disk under the fence keeper's cache-file
	// writes: nil outside chaos builds (in one, its writes hang while
	// /debug/chaos/disk says so).
	chaosDisk func(disk.Disk) disk.Disk

	advertise string // ZooKeeper mode: host:port in the znodes
	nodeKey   string // ZooKeeper mode
	coord     *coordinator.Coordinator
	segments  *segmentMode // ZooKeeper mode: dense IDs per tag

	ident   identity
	gen     *snowflake.Generator
	issuing *fencing.Gate // what the generator may issue up to: min(local fence, ZooKeeper fence)
	// finalZKFence is set at a graceful stop to the last issued time: the
	// cache file's ZooKeeper fence comes down to it before ZooKeeper's does.
	finalZKFence atomic.Int64
	guard        *health.Guard
	guardSet     atomic.Pointer[health.Guard] // guard, for readers on other goroutines (reset tags' periods)
	rollback     *clockguard.Rollback
	overflow     *health.Fault         // time_overflow: the clock is past the layout's end
	jumps        *clockguard.JumpGuard // clock_jump: unconfirmed forward jumps hold the fences
	stalled      *health.Fault         // clock_stalled: the wall clock stopped moving
	// borrowOut is borrow_exhausted: borrowing through a rollback reached
	// the fence (--rollback-policy borrow).
	borrowOut *health.Fault
	// stalledAt is the wall clock (ns) when clock_stalled tripped.
	stalledAt atomic.Int64
	keeper    *fencing.Keeper
	lock      *cacheLock // the cache file's, held for the life of the process
	startWait *fencing.StartWait
	watcher   *clockguard.Watcher
	ntp       *clockguard.NTP
	peers     *clockguard.Peers // nil in standalone mode
	metrics   *metrics.Metrics
	status    *statuspage.Page
	srv       *server.Server
	start     *startPhase             // answers HTTP until srv serves, then hands the listener over
	loops     []func(context.Context) // background work, stopped at shutdown
	tls       *nodeTLS                // nil: plain HTTP

	// alivePeers are the peers the peer check last read under alive/
	// (ZooKeeper mode), for GET /cluster/nodes.
	alivePeers atomic.Pointer[[]coordinator.Peer]
	// apiTokens are --api-tokens-file's hashes (nil: none required).
	apiTokens *segment.TokenSet
}

// Run runs a node until ctx ends, then stops it gracefully and returns nil.
// Configuration problems (flags, a cache file of another identity, a
// cluster of another layout) are errors wrapping ErrInvalidConfig, returned
// before anything is served. If ctx ends before the node serves (e.g. while
// it waits for ZooKeeper), Run returns nil.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) (err error) {
	var o seams
	if cfg.seams != nil {
		o = *cfg.seams
	}
	if o.listener != nil {
		defer o.listener.Close() // closed by the server too; a second Close is harmless
	}
	n, err := newNode(cfg, o, log)
	if err != nil {
		return err
	}
	cfg = n.cfg
	if o.schedule != nil {
		ctx = clock.WithSchedule(ctx, o.schedule)
	}
	n.timers = context.WithoutCancel(ctx)
	// 0. One process per cache file; the listener first, so the advertised
	// address (which may be the node key) has its real port.
	lock, err := lockCacheFile(cfg.CacheFile)
	if err != nil {
		return err
	}
	defer lock.release()
	n.lock = lock
	if removed := lock.removeStaleTemps(cfg.CacheFile); removed > 0 {
		log.Info().Int("files", removed).Msg("removed temp files that writes killed mid-way left beside the cache file")
	}
	if n.tls, err = newNodeTLS(cfg, log); err != nil {
		return err
	}
	ln := o.listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
	}
	if n.tls != nil {
		ln = tlsfiles.NewListener(ln, n.tls.server, &n.tls.fails)
	}
	// From here the port answers: /healthz 200, /readyz 503 with what the
	// node waits for (the claim can take a session timeout and more).
	if n.start, err = n.startServing(ln); err != nil {
		ln.Close()
		return fmt.Errorf("http server while starting: %w", err)
	}
	log.Info().Str("listen", ln.Addr().String()).Bool("tls", n.tls != nil).Msg("listening: /healthz answers while the node starts, /readyz says what it waits for")
	serving := false
	defer func() {
		if !serving {
			n.start.stop()
			_ = n.closeCoordinator(0, time.Time{})
		}
	}()

	// 1. Identity: worker ID and the fence the previous run left.
	if cfg.standalone() {
		n.start.setStep("reading the cache file " + cfg.CacheFile)
		n.ident, err = standaloneIdentity(cfg, n.layout)
	} else {
		err = n.zkIdentity(ctx, ln.Addr())
	}
	n.addr = n.displayAddr(ln.Addr())
	if err != nil {
		if ctx.Err() != nil {
			n.log.Info().Err(err).Msg("stopped before serving")
			return nil
		}
		return err
	}
	if err := n.build(); err != nil {
		return err
	}
	n.logStart(ln.Addr())
	if o.built != nil {
		o.built(n)
	}
	// 5. Serve until ctx ends, with the background loops; then stop.
	serving = true
	return n.serve(ctx)
}

// newNode checks cfg and builds what needs no file, port or ZooKeeper:
// the clock (with the chaos build's hooks), the routes, the layout and the
// API tokens.
func newNode(cfg Config, o seams, log zerolog.Logger) (n *node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	given := cfg.CacheFile
	if cfg.CacheFile, err = resolveCacheFile(cfg.CacheFile); err != nil {
		return nil, err
	}
	if cfg.CacheFile != given {
		log.Info().Str("cache_file", given).Str("resolved", cfg.CacheFile).Msg("the cache file path goes through symlinks: using the file they lead to")
	}
	if o.clock == nil {
		o.clock = clock.NewSystem()
	}
	n = &node{cfg: cfg, log: log, seams: o}
	hooks, err := chaosSetup(o.clock)
	if err != nil {
		return nil, err
	}
	n.clock, n.chaosDisk = hooks.clock, hooks.disk
	if n.routes, err = mergeRoutes(hooks.routes); err != nil {
		return nil, err
	}
	if n.layout, err = cfg.parseLayout(clock.WallTime(n.clock)); err != nil {
		return nil, err
	}
	if cfg.APITokensFile != "" {
		if n.apiTokens, err = loadAPITokens(cfg.APITokensFile); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// build makes the generator, the guard and its checks, writes the fence
// once, and makes the metrics, the status page and the HTTP server, with
// their background loops.
func (n *node) build() error {
	n.start.setStep("building the generator, the fences and the checks")
	// 2. Generator: never issues at or before the fence's tick.
	if err := n.newGenerator(); err != nil {
		return err
	}
	// 3. Guard and its checks; the fence is written once before serving.
	if err := n.newGuard(); err != nil {
		return err
	}
	if err := n.keeper.Extend(n.timers); err != nil {
		return fmt.Errorf("first write of the time fence to %s: %w", n.cfg.CacheFile, err)
	}
	// 4. Metrics, status page and the HTTP server.
	if err := n.newMetrics(); err != nil {
		return err
	}
	if err := n.newStatusPage(); err != nil {
		return err
	}
	if err := n.newServer(); err != nil {
		return err
	}
	n.loops = append(n.loops, n.watchTimeField)
	if n.segments != nil && n.segments.resume(n.ident.entry.Incarnation) {
		n.loops = append(n.loops, n.segments.run)
	}
	return nil
}

// zkIdentity creates the coordinator and claims the worker ID (see the
// package-level zkIdentity for the rules).
func (n *node) zkIdentity(ctx context.Context, listening net.Addr) error {
	adv, err := n.cfg.advertiseAddr(listening)
	if err != nil {
		return err
	}
	n.advertise, n.nodeKey = adv, n.cfg.nodeKeyFor(adv)
	coord, err := coordinator.New(coordinator.Config{
		Servers: n.cfg.zkServers(), SessionTimeout: n.cfg.ZKSessionTimeout,
		Cluster: n.cfg.Cluster, NodeKey: n.nodeKey, Advertise: n.advertise, Version: n.cfg.buildVersion(), Auth: n.cfg.ZKAuth, CreateCluster: n.cfg.CreateCluster,
		Layout: n.layout, WorkerIDs: n.cfg.workerIDs(), RecycleAfter: n.cfg.RecycleAfter, ReportInterval: n.cfg.ReportInterval,
		ZKFenceAhead:   n.cfg.ZKFenceAhead,
		ConnectTimeout: connectTimeout(n.cfg.ZKSessionTimeout),
		Clock:          n.clock, Log: n.log, Dial: n.cfg.dialer(n.log),
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	n.coord = coord
	n.start.setClaim(coord.ClaimProgress)
	n.segments = newSegmentMode(n.cfg, n.nodeKey, n.log)
	n.segments.disk = n.files()
	n.segments.zkUp = coord.Connected // /readyz/segment before the lazy store opens
	n.segments.periodClock = n.periodClock
	start := n.clock.Mono()
	n.ident, err = zkIdentity(ctx, n.cfg, n.layout, n.nodeKey, coord, n.log)
	if err != nil {
		return err
	}
	ev := n.log.Info().Int64("worker_id", n.ident.entry.WorkerID).Str("node_key", n.nodeKey).Str("advertise", n.advertise).
		Bool("from_cache", n.ident.resumed).Dur("claim_took_ms", n.clock.Mono()-start)
	if h := n.ident.prevHolder; h != nil {
		ev = ev.Str("prev_node_key", h.NodeKey).Str("prev_addr", h.Addr).Str("prev_token", h.Token).Int64("prev_fence_ms", int64(h.Fence))
	}
	ev.Msg("worker ID established")
	return nil
}

// files is the disk under the cache file and the segment state file,
// written only while this process holds the cache file's lock.
func (n *node) files() disk.Disk { return lockedDisk{Disk: n.cfg.files(), held: n.lock.held} }

// connectTimeout is how long the start waits for a ZooKeeper session before
// it counts ZooKeeper as down (and serves from the cache file): one session
// timeout, at least 2s.
func connectTimeout(session time.Duration) time.Duration { return max(session, 2*time.Second) }

// closeCoordinator closes the ZooKeeper session (if any), writing fence as
// the final fence when it is positive.
func (n *node) closeCoordinator(fence snowflake.UnixMilli, deadline time.Time) error {
	if n.coord == nil {
		return nil
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(n.cfg.ShutdownTimeout)
	}
	ctx, cancel := clock.WithDeadline(n.timers, deadline)
	defer cancel()
	if err := n.coord.Close(ctx, fence); err != nil {
		return fmt.Errorf("close ZooKeeper session: %w", err)
	}
	return nil
}

func mergeRoutes(sets ...map[string]fasthttp.RequestHandler) (map[string]fasthttp.RequestHandler, error) {
	out := map[string]fasthttp.RequestHandler{}
	for _, set := range sets {
		for p, h := range set {
			if _, dup := out[p]; dup {
				return nil, fmt.Errorf("route %s registered twice", p)
			}
			out[p] = h
		}
	}
	return out, nil
}

func (n *node) newGenerator() error {
	gen, err := snowflake.NewGenerator(snowflake.Config{
		Layout: n.layout, WorkerID: n.ident.entry.WorkerID, Clock: n.clock,
		Sleep:             func(d time.Duration) { clock.Sleep(n.timers, d) },
		RollbackTolerance: n.cfg.RollbackTolerance, After: n.ident.entry.Fence,
		NoRollbackTolerance: n.cfg.RollbackTolerance == 0, // --rollback-tolerance 0 is none
		Borrow:              n.cfg.borrow(),
	})
	if err != nil {
		return fmt.Errorf("generator for worker %d, fence %d: %w", n.ident.entry.WorkerID, n.ident.entry.Fence, err)
	}
	n.gen = gen
	zkFence := fencing.NoZKFence // standalone: the local fence alone
	if n.coord != nil {
		zkFence = n.ident.entry.ZKFence
	}
	n.issuing = fencing.NewGate(gen, zkFence)
	return nil
}

// newGuard registers every check of the node and their loops: the start
// gate, the fence keeper, rollback (generator and watcher), the generator's
// faults (time_overflow, clock_stalled), NTP, the jump guard (clock_jump),
// and in ZooKeeper mode the peers check and the coordinator's lease_lost
// and zk_fence. Every check starts pending (the fault checks passing), so
// the node enters service only after each has passed once.
func (n *node) newGuard() error {
	n.guard = health.New(n.log, func() time.Time { return clock.WallTime(n.clock) })
	n.guardSet.Store(n.guard)

	// clock_behind_fence (prev_holder_fence): ready from the start of the
	// tick after the fence's.
	var readyAt time.Time
	if f := n.ident.entry.Fence; f != 0 {
		readyAt = time.Unix(0, n.layout.TickStart(n.layout.TickOf(f.Time().UnixNano())+1))
	}
	if h := n.ident.prevHolder; h != nil {
		// prev_holder_fence: the previous holder's ZooKeeper fence, not a
		// fence of this node's own, so not a clock's fault within what a
		// correct clock can need.
		n.startWait = fencing.NewPrevHolderWait(n.guard, n.clock, readyAt, n.cfg.MaxStartWait, *h, n.log)
	} else {
		n.startWait = fencing.NewStartWait(n.guard, n.clock, readyAt, n.cfg.MaxStartWait, n.log)
	}
	n.loops = append(n.loops, func(ctx context.Context) { n.startWait.Run(ctx) })

	// fence_persist_failed: the fence keeper, which also records when the
	// last report reached ZooKeeper (for a start while ZooKeeper is down).
	fenceDisk := n.files()
	if n.chaosDisk != nil {
		fenceDisk = n.chaosDisk(fenceDisk)
	}
	w := &fenceWriter{path: n.cfg.CacheFile, disk: fenceDisk, entry: n.ident.entry, clock: n.clock, floor: n.issuing.LastIssued,
		finalZKFence: func() snowflake.UnixMilli { return snowflake.UnixMilli(n.finalZKFence.Load()) }, beforeToken: n.seams.beforeToken}
	if n.coord != nil {
		w.status = n.coord.Status
	}
	n.keeper = fencing.NewKeeper(n.guard, n.clock, n.issuing, n.cfg.FenceAhead, w.entry.Fence, w.persist, n.log)
	n.loops = append(n.loops, n.keeper.Run)

	// clock_rollback: tripped by the generator (onIDError) and the watcher,
	// cleared by Run once the clock is past the last issued ID.
	n.rollback = clockguard.NewRollback(n.guard, n.gen, 0)
	n.loops = append(n.loops, n.rollback.Run)
	n.newGeneratorFaults()
	var err error
	n.watcher, err = clockguard.NewWatcher(n.clock, clockguard.WatcherConfig{
		Tolerance:  max(n.cfg.RollbackTolerance, time.Millisecond),
		OnRollback: n.watcherStepBack,
		Log:        n.log.With().Str("component", "watcher").Logger(),
	})
	if err != nil {
		return fmt.Errorf("clock watcher: %w", err)
	}
	// The first sample is the baseline. Take it now, before the node can
	// serve, not when the sampler's goroutine first gets a CPU: a step in
	// between would be folded into the baseline and never seen. The jump
	// guard's loop feeds the watcher its later samples (newJumpGuard).
	n.watcher.Step()

	// ntp_offset, ntp_unreachable (both pass at once without --ntp).
	n.ntp, err = clockguard.NewNTP(n.guard, n.clock, clockguard.NTPConfig{
		Servers: n.cfg.ntpServers(), Interval: n.cfg.NTPInterval, MaxOffset: n.cfg.NTPMaxOffset,
		Required: n.cfg.NTPRequired, Log: n.log.With().Str("component", "ntp").Logger(),
	})
	if err != nil {
		return fmt.Errorf("%w: --ntp %q: %w", ErrInvalidConfig, n.cfg.NTP, err)
	}
	n.loops = append(n.loops, n.ntp.Run)

	if n.coord == nil {
		n.newJumpGuard()
		return nil // standalone: no peers, no ZooKeeper checks
	}
	// peer_offset against the live nodes under alive/.
	if err := n.newPeers(); err != nil {
		return err
	}
	n.newJumpGuard()
	// lease_lost, zk_fence; renewals, lease and alive znode.
	n.coord.HoldRenewalsWhile(n.jumps.Holding)
	n.coord.Attach(n.guard)
	n.loops = append(n.loops, func(ctx context.Context) {
		if err := n.coord.Run(ctx, n.issuing); err != nil {
			n.log.Error().Err(err).Msg("coordinator stopped")
		}
	})
	return nil
}

// tripRollback takes the node out of service for a clock rollback beyond
// the tolerance, found by the clock reading at, and counts it in the
// metrics (which merge the many reports of one rollback into one event).
// Quick and non-blocking.
func (n *node) tripRollback(behind time.Duration, at time.Time, source string) {
	n.rollback.Trip(behind, source)
	n.metrics.ObserveRollback(behind, at)
}

// watcherStepBack reacts to the watcher seeing the wall clock step back by
// more than the tolerance (at is the reading that found it). The step is
// counted as a rollback in the metrics; the node leaves service only when
// the clock is now behind the last issued ID by more than the tolerance,
// with that figure as the detail. A step that leaves the clock ahead of
// every ID issued harms nothing: tripping on it took the node out for the
// few microseconds until the check cleared, with a false "behind" detail.
// (The generator still checks every request itself.)
func (n *node) watcherStepBack(step time.Duration, at time.Time) {
	n.metrics.ObserveRollback(step, at)
	if n.cfg.borrow() {
		return // the generator borrows; the fence bounds it
	}
	if behind := n.gen.Behind(); behind > n.cfg.RollbackTolerance {
		n.rollback.Trip(behind, "watcher")
	}
}

// onIDError reacts to the generator refusing an ID (called by the server on
// the request path: quick, non-blocking).
//
// ErrFenceReached (the clock jumped forward past the persisted fence, or a
// fence write is late) pokes the fence keeper, which persists a new fence
// at once (persist first, then hand it to the generator; never lower)
// instead of at its next tick: the refusals last about one fence write.
func (n *node) onIDError(err error) {
	var rb *snowflake.RollbackError
	switch {
	case errors.As(err, &rb):
		n.tripRollback(rb.Behind, rb.At, "generator")
	case errors.Is(err, snowflake.ErrBeforeEpoch):
		at := time.Unix(0, n.clock.WallNanos())
		n.tripRollback(n.gen.Behind(), at, "generator (clock before the epoch)")
	case errors.Is(err, snowflake.ErrFenceReached):
		n.keeper.Wake()
	case errors.Is(err, snowflake.ErrBorrowExhausted):
		n.borrowOut.Trip(err.Error())
	case errors.Is(err, snowflake.ErrTimeOverflow):
		n.overflow.Trip(err.Error())
	case errors.Is(err, snowflake.ErrClockStalled):
		n.stalledAt.Store(n.clock.WallNanos())
		n.stalled.Trip(err.Error())
	}
}

// newJumpGuard registers clock_jump: a forward jump beyond --fence-ahead is
// not persisted into any fence until NTP or the peers confirm it (or none
// can answer for clockguard.JumpHold). Call it once the watcher, the NTP and the peer
// checks exist: the jump guard's loop reads the wall and monotonic clocks
// at the watcher's interval for both (one sampler, clockguard.Sampler).
func (n *node) newJumpGuard() {
	// The jump guard observes each reading first, before the watcher's
	// logging and rollback trips, as soon as its own loop did.
	n.jumps = clockguard.NewJumpGuard(n.guard, n.clock, clockguard.JumpConfig{
		Threshold: n.cfg.FenceAhead, NTP: n.ntp, Peers: n.peers, Stepped: n.keeper.Wake,
		Interval: n.watcher.Interval(), Feed: func(s clockguard.Sample) { n.watcher.Observe(s) },
		Log: n.log.With().Str("component", "jump").Logger(),
	})
	n.keeper.SetHold(n.jumps.Holding)
	n.loops = append(n.loops, n.jumps.Run)
}

// newGeneratorFaults registers time_overflow, clock_stalled and
// borrow_exhausted: generator errors that are not per request but mean the
// node cannot issue IDs until the clock is fixed or catches up. Tripped on
// the request path (onIDError), cleared by their loops: time_overflow once
// the clock is back before the layout's end (a clock set far ahead and
// corrected), clock_stalled once the wall clock moved on by a tick and is
// not behind the last issued ID, borrow_exhausted once the clock is past the
// last issued ID.
func (n *node) newGeneratorFaults() {
	faults := health.NewFaults(0) // one loop clears all three
	end := n.layout.End().UnixNano()
	n.overflow = faults.Add(n.guard, health.ReasonTimeOverflow, func() bool { return n.clock.WallNanos() < end })
	unit := int64(n.layout.Unit)
	n.stalled = faults.Add(n.guard, health.ReasonClockStalled, func() bool {
		return n.clock.WallNanos() >= n.stalledAt.Load()+unit && n.gen.Behind() == 0
	})
	// borrow_exhausted clears once the clock is past the last issued ID:
	// from there the IDs follow the clock again, and the fence with it.
	n.borrowOut = faults.Add(n.guard, health.ReasonBorrowExhausted, func() bool { return n.gen.Behind() == 0 })
	n.loops = append(n.loops, faults.Run)
}

func (n *node) newServer() error {
	routes, err := mergeRoutes(n.routes, n.ownRoutes())
	if err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	cfg := server.Config{
		IDs: n.gen, Guard: n.guard, Clock: n.clock,
		OnIDError: n.onIDError,
		ClockInfo: func() any { return clockInfo(n.snapshot()) },
		MaxBatch:  n.cfg.MaxBatch,
		Log:       n.log.With().Str("component", "http").Logger(),
		Routes:    routes,
		Observer:  n.metrics,
	}
	cfg.Authorize = n.tls.authorizer()
	cfg.ClusterNodes = n.clusterNodes
	cfg.APITokens = n.apiTokens
	if n.segments != nil {
		cfg.Segments = n.segments
	}
	if n.seams.noMetrics {
		cfg.Observer = nil
	}
	srv, err := server.New(cfg)
	if err != nil {
		return fmt.Errorf("http server: %w", err)
	}
	n.srv = srv
	return nil
}

func (n *node) logStart(addr net.Addr) {
	years := n.yearsLeft()
	ev := n.log.Info().Str("mode", n.ident.mode).Int64("worker_id", n.ident.entry.WorkerID).
		Str("layout", n.layout.String()).Str("epoch", n.layout.Epoch.Format(time.RFC3339Nano)).
		Str("time_unit", n.layout.Unit.String()).Str("listen", addr.String()).
		Int64("fence_ms", int64(n.ident.entry.Fence)).Str("fence_from", n.ident.from)
	if n.coord != nil {
		ev = ev.Str("cluster", n.cfg.Cluster).Str("node_key", n.nodeKey).Str("advertise", n.advertise).
			Bool("from_cache", n.ident.resumed).Str("recycle_after_from", n.ident.recycleAfterFrom)
		if n.ident.recycleAfter > 0 {
			ev = ev.Str("recycle_after", n.ident.recycleAfter.String())
		}
	}
	ev.Float64("years_left", math.Round(years*10)/10).Bool("chaos_build", ChaosBuild).Msg("snowflaked starting")
	n.checkTimeField()
}

// serve runs the server and background loops until ctx ends or the server
// fails, then stops in order: leave service (the coordinator deletes the
// alive znode), let in-flight requests finish, stop the loops, write the
// exact last issued time as the fence to ZooKeeper (closing the session)
// and to the cache file.
func (n *node) serve(ctx context.Context) error {
	// The port first: no check may pass (nor the alive znode appear) while
	// the start phase's server still answers 503 starting.
	ln := n.start.handOver()
	bg, stopBG := context.WithCancel(n.timers)
	var wg sync.WaitGroup
	for _, loop := range n.loops {
		wg.Go(func() { loop(bg) })
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- n.srv.Serve(ln) }()

	var runErr error
	select {
	case <-ctx.Done():
		n.log.Info().Msg("stopping: leaving service")
	case err := <-serveErr:
		runErr = fmt.Errorf("http server stopped: %w", err)
		if err == nil {
			runErr = errors.New("http server stopped by itself")
		}
	}
	n.guard.Stop()
	// One deadline for the whole stop, even with a hung disk: in-flight
	// requests, the final fence writes and the ZooKeeper session.
	deadline := time.Now().Add(n.cfg.ShutdownTimeout)
	// Segment mode gets the first half of it: a ZooKeeper that hangs must
	// not eat the share of the final fence writes below (a clean stop would
	// turn into an unclean one, and a restart elsewhere would wait up to G).
	segDeadline := time.Now().Add(n.cfg.ShutdownTimeout / 2)
	segDone := make(chan struct{})
	go func() {
		// Segment mode stops at once, beside the HTTP drain (which may wait
		// seconds for keep-alive connections): its unissued ranges go back
		// to ZooKeeper within its half of the deadline; segment requests
		// from now on get 503 segment_unavailable and clients go elsewhere.
		defer close(segDone)
		if n.segments == nil {
			return
		}
		sctx, cancel := clock.WithDeadline(n.timers, segDeadline)
		defer cancel()
		if err := n.segments.close(sctx); err != nil {
			n.log.Warn().Err(err).Msg("segment mode: some ranges could not be returned (lost, never reissued)")
		}
	}()
	sctx, cancel := clock.WithDeadline(n.timers, deadline)
	shutErr := n.srv.Shutdown(sctx)
	cancel()
	n.start.closeListener() // the listener itself: the server closed its view
	stopBG()
	wg.Wait()
	segWait := clock.NewTimer(n.timers, time.Until(segDeadline))
	defer segWait.Stop()
	select {
	case <-segDone:
	case <-segWait.C:
		// A hung disk can hold the state-file write: the ranges stay listed
		// there (a restart resumes them) and nothing was given back twice.
		n.log.Warn().Msg("segment mode did not stop within half of --shutdown-timeout; stopping without it")
	}

	if runErr != nil || shutErr != nil {
		// Requests may still be running: keep the persisted fence (ahead of
		// anything they can issue) instead of the last issued time, in
		// ZooKeeper too.
		if shutErr != nil {
			shutErr = fmt.Errorf("stop http server within --shutdown-timeout %s: %w", n.cfg.ShutdownTimeout, shutErr)
		}
		// The ZooKeeper fence stays where the last renewal put it: lowering
		// it would need the cache file's copy lowered first (see below).
		fence := n.keeper.Persisted()
		closeErr := n.closeCoordinator(0, deadline)
		n.log.Warn().AnErr("run_error", runErr).AnErr("shutdown_error", shutErr).AnErr("zookeeper_error", closeErr).
			Int64("fence_ms", int64(fence)).Msg("unclean stop: the fences stay ahead, a restart waits for them")
		return errors.Join(runErr, shutErr, closeErr)
	}
	// No request is running and none can start: freeze the generator at its
	// last tick and make that the fence, locally and then in ZooKeeper.
	// Ordering: the cache file also records the ZooKeeper fence granted to
	// this token (a start with ZooKeeper down may issue up to it), so it
	// must come down on disk before it comes down in ZooKeeper, where the
	// next claimer reads it; if the disk write fails, ZooKeeper keeps the
	// last renewal's fence.
	last := n.issuing.Freeze()
	n.finalZKFence.Store(int64(last))
	if mutation.Broken(mutation.S2StopLowersZooKeeperFirst) {
		_ = n.closeCoordinator(last, deadline) // ZooKeeper's fence comes down first
	}
	if err := n.keeper.PersistFinal(n.timers, last, max(time.Until(deadline), 10*time.Millisecond)); err != nil {
		n.log.Error().Err(err).Int64("fence_ms", int64(n.keeper.Persisted())).Msg("final fence not written: a restart waits for the previous one")
		if cerr := n.closeCoordinator(0, deadline); cerr != nil {
			n.log.Warn().Err(cerr).Msg("closing the ZooKeeper session")
		}
		return err
	}
	if err := n.closeCoordinator(last, deadline); err != nil {
		// ZooKeeper keeps the last reported fence, which covers every ID.
		n.log.Warn().Err(err).Msg("final fence not written to ZooKeeper: it keeps the last reported one")
	}
	n.log.Info().Int64("fence_ms", int64(last)).Msg("stopped: fence set to the last issued time")
	return nil
}

// clockReasons are the guard's reasons that say the node's clock is not to
// be trusted: a reset tag's period is not picked by it then.
var clockReasons = map[health.Reason]bool{
	health.ReasonClockRollback: true, health.ReasonNTPOffset: true, health.ReasonPeerOffset: true,
	health.ReasonClockJump: true, health.ReasonClockStalled: true, health.ReasonTimeOverflow: true,
	health.ReasonClockBehindFence: true,
}

// periodClock is the clock reset tags pick their period by: the node's
// wall clock (the chaos build's offset included), refused while one of the
// guard's clock checks fails, so that two nodes in service serve different
// periods only while their clocks are within the checks' tolerances of
// each other around a period's start.
func (n *node) periodClock() (time.Time, error) {
	if g := n.guardSet.Load(); g != nil {
		for r, detail := range g.Failing() {
			if clockReasons[r] {
				return time.Time{}, fmt.Errorf("%s: %s", r, detail)
			}
		}
	}
	return clock.WallTime(n.clock), nil
}
