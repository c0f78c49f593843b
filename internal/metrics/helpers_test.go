package metrics

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// nopLog discards the guard's lines.
var nopLog = zerolog.Nop()

// testNow is the fake clocks' start.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fixture is a Metrics over a snapshot the test sets (and a real guard).
type fixture struct {
	m     *Metrics
	clk   *clocktest.Fake
	guard *health.Guard
	// snap is what a scrape reads, but for Now (the clock's) and the
	// guard's part of Readings (the guard's); its Watcher, NTP and Peers
	// are kept.
	snap nodestate.Snapshot
}

// snapshot is the fixture's Config.Snapshot.
func (f *fixture) snapshot() nodestate.Snapshot {
	s := f.snap
	s.Now = f.now()
	r := clockguard.BuildReadings(f.guard, nil, nil, nil)
	r.Watcher, r.NTP, r.Peers = s.Watcher, s.NTP, s.Peers
	s.Readings = r
	return s
}

// newFixture builds metrics over a snapshot with every section set (at
// zero figures: tests set them, or drop sections, in f.snap); mod may
// change the config before New.
func newFixture(t testing.TB, mod func(*Config)) *fixture {
	t.Helper()
	f := &fixture{clk: clocktest.NewFake(testNow)}
	f.guard = health.New(nopLog, func() time.Time { return time.Unix(0, f.clk.WallNanos()) })
	f.snap = nodestate.Snapshot{
		WorkerID: 42, Layout: snowflake.DefaultLayout(),
		Fence: snowflake.UnixMilliOf(testNow.Add(3 * time.Second)),
		Readings: clockguard.Readings{
			Watcher: &clockguard.WatcherStats{}, NTP: &clockguard.NTPSnapshot{}, Peers: &clockguard.PeerSnapshot{},
		},
		ZK: &coordinator.Status{},
	}
	cfg := Config{Snapshot: f.snapshot}
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

// liveSnapshot is a Config.Snapshot that reads a real generator and guard
// on clk, as the node's snapshot does.
func liveSnapshot(gen *snowflake.Generator, guard *health.Guard, clk clock.Clock) func() nodestate.Snapshot {
	return func() nodestate.Snapshot {
		return nodestate.Snapshot{
			WorkerID: gen.WorkerID(), Layout: gen.Layout(), Now: time.Unix(0, clk.WallNanos()),
			Readings: clockguard.BuildReadings(guard, nil, nil, nil),
			Generator: nodestate.Generator{
				Stats: gen.Stats(), LastIssued: gen.LastIssued(), IssueFence: gen.Fence(), Behind: gen.Behind(),
			},
		}
	}
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
