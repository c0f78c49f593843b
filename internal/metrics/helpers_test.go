package metrics

import (
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// nopLog discards the guard's lines.
var nopLog = zerolog.Nop()

// testNow is the fake clocks' start.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeGen is a GeneratorSource with settable stats.
type fakeGen struct {
	mu     sync.Mutex
	stats  snowflake.Stats
	worker int64
	layout snowflake.Layout
	behind time.Duration
}

func (f *fakeGen) Stats() snowflake.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *fakeGen) setStats(s snowflake.Stats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats = s
}

func (f *fakeGen) WorkerID() int64 { return f.worker }
func (f *fakeGen) Behind() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.behind
}
func (f *fakeGen) Layout() snowflake.Layout { return f.layout }

// fakeSources are settable stand-ins for the optional sources.
type fakeSources struct {
	mu      sync.Mutex
	watcher clockguard.WatcherStats
	ntp     clockguard.NTPSnapshot
	peers   clockguard.PeerSnapshot
	zk      coordinator.Status
}

type fakeWatcher struct{ f *fakeSources }
type fakeNTP struct{ f *fakeSources }
type fakePeers struct{ f *fakeSources }
type fakeZK struct{ f *fakeSources }

func (w fakeWatcher) Stats() clockguard.WatcherStats {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.f.watcher
}

func (n fakeNTP) Snapshot() clockguard.NTPSnapshot {
	n.f.mu.Lock()
	defer n.f.mu.Unlock()
	return n.f.ntp
}

func (p fakePeers) Snapshot() clockguard.PeerSnapshot {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	return p.f.peers
}

func (z fakeZK) Status() coordinator.Status {
	z.f.mu.Lock()
	defer z.f.mu.Unlock()
	return z.f.zk
}

// fixture is a Metrics over fakes (and a real guard).
type fixture struct {
	m     *Metrics
	clk   *clocktest.Fake
	gen   *fakeGen
	guard *health.Guard
	src   *fakeSources
	fence int64
}

// newFixture builds metrics with every source set; mod may change the
// config (e.g. drop sources) before New.
func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	f := &fixture{
		clk:   clocktest.NewFake(testNow),
		gen:   &fakeGen{worker: 42, layout: snowflake.DefaultLayout()},
		src:   &fakeSources{},
		fence: testNow.Add(3 * time.Second).UnixMilli(),
	}
	f.guard = health.New(nopLog, func() time.Time { return time.Unix(0, f.clk.WallNanos()) })
	cfg := Config{Sources: Sources{
		Generator: f.gen, Guard: f.guard, Clock: f.clk,
		Fence:   func() int64 { return f.fence },
		Watcher: fakeWatcher{f.src}, NTP: fakeNTP{f.src}, Peers: fakePeers{f.src}, ZK: fakeZK{f.src},
	}}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("new metrics: %v", err)
	}
	f.m = m
	return f
}

// now is the fixture clock's wall reading.
func (f *fixture) now() time.Time { return time.Unix(0, f.clk.WallNanos()) }

// scrape calls the handler as GET /metrics and parses the body.
func scrape(t testing.TB, m *Metrics) *exposition {
	t.Helper()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	ctx.Request.SetRequestURI("/metrics")
	m.Handler()(ctx)
	if sc := ctx.Response.StatusCode(); sc != fasthttp.StatusOK {
		t.Fatalf("GET /metrics: status %d: %s", sc, ctx.Response.Body())
	}
	if ct := string(ctx.Response.Header.ContentType()); ct != contentTypeText {
		t.Fatalf("GET /metrics: content type %q, want %q", ct, contentTypeText)
	}
	ex, err := parseExposition(string(ctx.Response.Body()))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, ctx.Response.Body())
	}
	return ex
}

// mustFind fails the test unless the series exists; it returns its value.
func mustFind(t testing.TB, ex *exposition, name string, labels ...string) float64 {
	t.Helper()
	v, ok := ex.find(name, labels...)
	if !ok {
		t.Fatalf("series %s%q is missing", name, labels)
	}
	return v
}
