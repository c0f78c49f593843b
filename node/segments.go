package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/segment"
)

// errSegmentsStarting is what Take answers before the segment service runs.
var errSegmentsStarting = fmt.Errorf("%w: segment mode is waiting for its ZooKeeper session", segment.ErrUnavailable)

// errNoSession is what the lazy store answers before its session exists.
var errNoSession = fmt.Errorf("%w: segment mode has no ZooKeeper session yet", coordinator.ErrZKUnavailable)

// segmentMode serves segment mode for a ZooKeeper node (server.SegmentSource
// and the metrics' and status page's source). It opens a ZooKeeper session
// of its own, so neither the worker-ID claim nor the clock guard gate it: a
// node out of service for its clock still hands out dense IDs, and its
// holder records and range operations do not share the worker lease's
// session. That session is opened lazily (lazy set, as the node does): only
// once a tag is used, by a segment request or by ranges the state file
// resumes, so a node that never serves a segment holds one ZooKeeper
// session (the coordinator's), not two. When the cluster's incarnation is
// already known (from the claim, or the cache file while ZooKeeper is down)
// it resumes the state file at once: the ranges a crashed predecessor held
// serve before ZooKeeper answers.
type segmentMode struct {
	cfg  segment.ZKConfig
	file string // the state file: the cache file's path + ".segments"
	node string // holder name: the node key
	inc  string // the incarnation known at start ("" when none)
	disk disk.Disk
	// wrapStore, when set, wraps the store the service uses (seams.wrapStore);
	// nil in the node.
	wrapStore func(segment.Store) segment.Store
	sched     clock.Schedule // the service's timers (seams.schedule)
	// periodClock picks reset tags' periods (nil: the service's default,
	// time.Now): the node's clock, refused while a clock check fails.
	periodClock func() (time.Time, error)
	log         zerolog.Logger
	store       lazyStore
	svc         atomic.Pointer[segment.Service]

	// lazy: run opens the store only once a tag is used (want); false
	// opens it at once (the simulations).
	lazy bool
	// zkUp reports whether the node's coordinator has a ZooKeeper session
	// now: /readyz/segment's answer while the store is not wanted yet (nil:
	// not ready then).
	zkUp func() bool
	// openWait bounds how long the first segment request waits for the
	// store's first open attempt (0: segmentOpenWait).
	openWait time.Duration

	wantOnce sync.Once
	wanted   chan struct{} // closed once a tag is used: run opens the store
	tried    chan struct{} // closed once the first open attempt ended (opened or failed)
	triedOne sync.Once
	lastErr  atomic.Pointer[error] // the last open attempt's error (nil: none failed)
	stopped  atomic.Pointer[error] // run gave up for good (an incarnation mismatch)

	mu     sync.Mutex
	closed bool // close ran: a store opened after it is closed at once
}

// segmentOpenWait bounds how long a segment request waits for the lazy
// store's first open attempt: a ZooKeeper that answers opens a session in
// milliseconds; one that does not gets a 503 after this, not a hung request.
const segmentOpenWait = 2 * time.Second

func newSegmentMode(cfg Config, nodeKey string, log zerolog.Logger) *segmentMode {
	return &segmentMode{
		cfg: segment.ZKConfig{Servers: cfg.zkServers(), Cluster: cfg.Cluster, Auth: cfg.ZKAuth,
			Timeout: connectTimeout(cfg.ZKSessionTimeout), Log: log, Dial: cfg.dialer(log), TokenStaleLimit: cfg.TokenStaleLimit},
		file: cfg.CacheFile + ".segments", node: nodeKey, log: log, disk: cfg.files(), wrapStore: cfg.storeWrapper(),
		sched: cfg.schedule(), lazy: true,
	}
}

// want asks run to open the store (a tag is used); idempotent.
func (m *segmentMode) want() {
	m.wantOnce.Do(func() { close(m.wantCh()) })
}

// wantCh is the channel want closes, made on first use (a segmentMode built
// as a literal has none yet).
func (m *segmentMode) wantCh() chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.wanted == nil {
		m.wanted = make(chan struct{})
	}
	return m.wanted
}

// triedCh is the channel closed once the first open attempt ended.
func (m *segmentMode) triedCh() chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tried == nil {
		m.tried = make(chan struct{})
	}
	return m.tried
}

// isWanted reports whether the store was asked for.
func (m *segmentMode) isWanted() bool {
	select {
	case <-m.wantCh():
		return true
	default:
		return false
	}
}

// awaitOpen asks for the store and waits, bounded by openWait and ctx, until
// it is open or its first open attempt ended. It returns nil when the store
// is open, else why not (wrapping segment.ErrUnavailable: a 503 JSON error).
func (m *segmentMode) awaitOpen(ctx context.Context) error {
	m.want()
	if m.store.p.Load() != nil {
		return nil
	}
	if p := m.stopped.Load(); p != nil {
		return fmt.Errorf("%w: segment mode stopped: %v", segment.ErrUnavailable, *p)
	}
	wait := m.openWait
	if wait <= 0 {
		wait = segmentOpenWait
	}
	t := clock.NewTimer(clock.WithSchedule(ctx, m.sched), wait)
	defer t.Stop()
	select {
	case <-m.triedCh():
	case <-t.C:
	case <-ctx.Done():
	}
	if m.store.p.Load() != nil {
		return nil
	}
	if p := m.lastErr.Load(); p != nil {
		return fmt.Errorf("%w: segment mode cannot open its ZooKeeper session: %v", segment.ErrUnavailable, *p)
	}
	return fmt.Errorf("%w: segment mode is still opening its ZooKeeper session (waited %v)", segment.ErrUnavailable, wait)
}

// lazyStore is segment.Store over a segment.ZKStore opened later: until then
// every call fails at once with errNoSession.
type lazyStore struct {
	p atomic.Pointer[segment.ZKStore]
}

func (l *lazyStore) get() (*segment.ZKStore, error) {
	if st := l.p.Load(); st != nil {
		return st, nil
	}
	return nil, errNoSession
}

func (l *lazyStore) Alloc(ctx context.Context, tag string, inc, step, above int64) (segment.Range, segment.Tag, error) {
	st, err := l.get()
	if err != nil {
		return segment.Range{}, segment.Tag{}, err
	}
	return st.Alloc(ctx, tag, inc, step, above)
}

func (l *lazyStore) AllocPeriod(ctx context.Context, tag string, inc, step int64, period string) (segment.Range, segment.Tag, error) {
	st, err := l.get()
	if err != nil {
		return segment.Range{}, segment.Tag{}, err
	}
	return st.AllocPeriod(ctx, tag, inc, step, period)
}

func (l *lazyStore) Return(ctx context.Context, tag string, inc int64, r segment.Range) error {
	st, err := l.get()
	if err != nil {
		return err
	}
	return st.Return(ctx, tag, inc, r)
}

func (l *lazyStore) Tag(ctx context.Context, tag string) (segment.Tag, error) {
	st, err := l.get()
	if err != nil {
		return segment.Tag{}, err
	}
	return st.Tag(ctx, tag)
}

func (l *lazyStore) Publish(ctx context.Context, tag, holder string, held []segment.Range) error {
	st, err := l.get()
	if err != nil {
		return err
	}
	return st.Publish(ctx, tag, holder, held)
}

// Key implements segment.KeyStore: opaque tags' keys.
func (l *lazyStore) Key(ctx context.Context, tag string, inc int64) ([]byte, error) {
	st, err := l.get()
	if err != nil {
		return nil, err
	}
	return st.Key(ctx, tag, inc)
}

// Tokens implements segment.TokenStore: token tags' hashes.
func (l *lazyStore) Tokens(ctx context.Context, tag string, inc int64) (segment.TokenSet, error) {
	st, err := l.get()
	if err != nil {
		return segment.TokenSet{}, err
	}
	return st.Tokens(ctx, tag, inc)
}

// WatchTag implements segment.TagWatcher: a node learns of a tag's
// deletion as it happens.
func (l *lazyStore) WatchTag(ctx context.Context, tag string, inc int64) (<-chan bool, error) {
	st, err := l.get()
	if err != nil {
		return nil, err
	}
	return st.WatchTag(ctx, tag, inc)
}

func (l *lazyStore) connected() bool {
	st := l.p.Load()
	return st != nil && st.Connected()
}

// Take is TakeWithToken without a token.
func (m *segmentMode) Take(ctx context.Context, tag string, dst []int64, n int) ([]int64, error) {
	return m.TakeWithToken(ctx, tag, nil, dst, n)
}

// TakeWithToken implements server.SegmentSource.
func (m *segmentMode) TakeWithToken(ctx context.Context, tag string, token []byte, dst []int64, n int) ([]int64, error) {
	svc, err := m.service(ctx, tag)
	if err != nil {
		return dst, err
	}
	return svc.TakeWithToken(ctx, tag, token, dst, n)
}

// service is the service that serves tag, once the store is open (the
// first use of a tag opens it).
func (m *segmentMode) service(ctx context.Context, tag string) (*segment.Service, error) {
	svc := m.svc.Load()
	if m.store.p.Load() == nil && (svc == nil || !svc.Serves(tag)) {
		// The first use of a tag opens the store: an invalid tag opens
		// nothing, and a tag resumed from the state file serves from it
		// while ZooKeeper does not answer.
		if err := segment.ValidateTag(tag); err != nil {
			return nil, err
		}
		if err := m.awaitOpen(ctx); err != nil {
			return nil, err
		}
		svc = m.svc.Load()
	}
	if svc == nil {
		if err := segment.ValidateTag(tag); err != nil {
			return nil, err
		}
		return nil, errSegmentsStarting
	}
	return svc, nil
}

// TakePeriod implements server.PeriodSource: TakeWithToken with the
// period of a reset tag's numbers.
func (m *segmentMode) TakePeriod(ctx context.Context, tag string, token []byte, dst []int64, n int) ([]int64, segment.Period, error) {
	svc, err := m.service(ctx, tag)
	if err != nil {
		return dst, segment.Period{}, err
	}
	return svc.TakePeriod(ctx, tag, token, dst, n)
}

// Resets implements server.PeriodSource.
func (m *segmentMode) Resets(ctx context.Context, tag string) (bool, error) {
	svc, err := m.service(ctx, tag)
	if err != nil {
		return false, err
	}
	return svc.Resets(ctx, tag)
}

// Ready implements server.SegmentSource: the session is up. Before any
// tag was used the store is not open (lazy): segment mode is then ready
// when the node's coordinator has a session, since the first request opens
// the store on the same ZooKeeper.
func (m *segmentMode) Ready() bool {
	if m.lazy && !m.isWanted() && m.stopped.Load() == nil {
		return m.zkUp != nil && m.zkUp()
	}
	return m.svc.Load() != nil && m.store.connected()
}

// Status lists the tags this node serves (none before it started).
// PossiblyLost counts the dense IDs of ranges whose allocation or take had
// an unknown outcome (ZooKeeper's answer lost): they may be lost, never
// issued twice. 0 before the store opens.
func (m *segmentMode) PossiblyLost() int64 {
	if st, err := m.store.get(); err == nil {
		return st.PossiblyLost()
	}
	return 0
}

func (m *segmentMode) Status() []segment.TagStatus {
	if svc := m.svc.Load(); svc != nil {
		return svc.Status()
	}
	return nil
}

// startService resumes the state file bound to incarnation inc.
func (m *segmentMode) startService(inc string) error {
	var store segment.Store = &m.store
	if m.wrapStore != nil {
		store = m.wrapStore(store)
	}
	svc, err := segment.New(segment.Config{Store: store, StateFile: m.file, Disk: m.disk, Incarnation: inc, Holder: m.node, Schedule: m.sched, PeriodClock: m.periodClock,
		Log: m.log.With().Str("component", "segments").Logger()})
	if err != nil {
		return fmt.Errorf("segment mode: %w", err)
	}
	m.svc.Store(svc)
	return nil
}

// resume records the incarnation known at start (from the claim, or the
// cache file while ZooKeeper is down) and, when there is one, starts the
// service on the state file now: the node calls it before its server
// answers, so the ranges a predecessor held serve from the first request
// (started from run, a request could come first and get 503). It reports
// false when the state file cannot be resumed: segment mode stays off.
func (m *segmentMode) resume(inc string) bool {
	m.inc = inc
	if inc == "" {
		return true
	}
	if err := m.startService(inc); err != nil {
		m.log.Error().Err(err).Msg("segment mode: cannot resume the state file")
		// Off for good: /readyz/segment says so and a segment request is
		// answered at once, not after waiting for an open that never comes.
		err = fmt.Errorf("cannot resume the state file %s: %w", m.file, err)
		m.stopped.Store(&err)
		return false
	}
	if svc := m.svc.Load(); !m.lazy || len(svc.Status()) > 0 {
		// Resumed ranges go back to ZooKeeper at the stop and their tags'
		// incarnations are checked now: they need the store at once.
		m.want()
	}
	return true
}

// run opens the store, retrying while ZooKeeper is unreachable, until it
// is open or ctx ends; with no service resumed yet, connect starts it. A
// lazy segment mode waits until a tag is used (want) before it dials.
func (m *segmentMode) run(ctx context.Context) {
	if !m.lazy {
		m.want()
	}
	select {
	case <-m.wantCh():
	case <-ctx.Done():
		return
	}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		err := m.connect(ctx)
		if err != nil {
			m.lastErr.Store(&err)
		}
		m.triedOnce()
		if err == nil {
			return
		}
		if errors.Is(err, coordinator.ErrIncarnationMismatch) || errors.Is(err, errSegmentsClosed) {
			m.stopped.Store(&err)
			m.log.Error().Err(err).Msg("segment mode stops")
			return
		}
		if attempt == 0 || attempt%30 == 0 {
			m.log.Warn().Err(err).Msg("segment mode: no ZooKeeper session yet; retrying")
		}
		clock.Sleep(ctx, min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second))
	}
}

func (m *segmentMode) connect(ctx context.Context) error {
	st, err := segment.OpenZK(ctx, m.cfg)
	if err != nil {
		return err
	}
	inc, err := st.Incarnation(ctx)
	if err != nil {
		st.Close()
		return err
	}
	if m.svc.Load() != nil && inc != m.inc {
		// The ranges resumed belong to another ZooKeeper: they must not go
		// back to this one. Keep them on disk and stop (the worker claim
		// refuses such a cluster too, unless told to accept it).
		st.Close()
		_ = m.svc.Load().Abandon()
		return fmt.Errorf("%w: the cache file's incarnation %s, ZooKeeper's %s", coordinator.ErrIncarnationMismatch, m.inc, inc)
	}
	if m.svc.Load() == nil {
		// Before the store is kept: a state file that cannot be resumed
		// fails every retry, and each would leave a session open until
		// ZooKeeper's per-address limit refused the whole host.
		if err := m.startService(inc); err != nil {
			st.Close()
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		// close ran meanwhile: the session would outlive the node's stop.
		st.Close()
		return errSegmentsClosed
	}
	m.store.p.Store(st)
	m.lastErr.Store(nil)
	m.log.Info().Str("state_file", m.file).Msg("segment mode ready: its ZooKeeper session is open")
	return nil
}

// errSegmentsClosed is connect's answer once close ran.
var errSegmentsClosed = errors.New("segment mode stopped before its ZooKeeper session opened")

// triedOnce records that the first open attempt ended.
func (m *segmentMode) triedOnce() {
	m.triedOne.Do(func() { close(m.triedCh()) })
}

// close stops segment mode: with a ZooKeeper session, the ranges held leave
// the state file and go back to ZooKeeper (nothing wasted on a clean stop),
// within ctx; without one they stay in the state file for the next start.
func (m *segmentMode) close(ctx context.Context) error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	svc := m.svc.Load()
	var err error
	switch {
	case svc == nil:
	case m.store.p.Load() == nil && len(svc.Status()) == 0:
		// No tag was used: the store never opened, nothing to give back.
		err = svc.Abandon()
	case !m.store.connected():
		if err = svc.Abandon(); err == nil {
			m.log.Info().Msg("segment mode stopped without ZooKeeper: its ranges stay in the state file for the next start")
		}
	default:
		wasted, cerr := svc.Close(ctx)
		if cerr != nil {
			err = fmt.Errorf("stop segment mode (%d IDs lost): %w", wasted, cerr)
		} else {
			m.log.Info().Msg("segment mode stopped: every unissued range returned to ZooKeeper")
		}
	}
	if st := m.store.p.Load(); st != nil {
		st.Close()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (--shutdown-timeout)", err)
	}
	return err
}
