package metrics

// Benchmarks of the request path. Run:
//
//	go test -run '^$' -bench . -benchmem ./metrics/
//
// A comparison with github.com/prometheus/client_golang is not here: its
// module is in the module cache, but its dependencies (client_model, common,
// procfs, perks, xxhash, protobuf) are neither in go.sum nor in the cache, so
// importing it even from a _test file needs a go.mod change, which the team
// rules forbid. The baselines below bound the answer instead: a bare atomic
// add (the floor any library can reach with a pre-resolved counter) and a
// look-up by a name built per request (what this package avoids).

import (
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/server"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func BenchmarkObserver(b *testing.B) {
	f := newFixture(b, nil)
	b.Run("Request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f.m.Request(endpoint.ID, 200)
		}
	})
	b.Run("RequestParallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				f.m.Request(endpoint.ID, 200)
			}
		})
	})
	b.Run("IssuedIDs", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f.m.IssuedIDs(1)
		}
	})
	b.Run("RequestAndIssuedIDs", func(b *testing.B) { // what one GET /id costs
		b.ReportAllocs()
		for b.Loop() {
			f.m.IssuedIDs(1)
			f.m.Request(endpoint.ID, 200)
		}
	})
}

// BenchmarkBaseline: what the request path is measured against.
func BenchmarkBaseline(b *testing.B) {
	b.Run("AtomicAdd", func(b *testing.B) {
		var n atomic.Uint64
		b.ReportAllocs()
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("AtomicAddParallel", func(b *testing.B) {
		var n atomic.Uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}

// BenchmarkScrape: one full GET /metrics body with every source set.
func BenchmarkScrape(b *testing.B) {
	f := newFixture(b, nil)
	f.snap.NTP = &clockguard.NTPSnapshot{Enabled: true, Last: &clockguard.NTPResult{}}
	f.snap.ZK = &coordinator.Status{Connected: true}
	for i := range 10 {
		f.snap.Peers.Peers = append(f.snap.Peers.Peers, clockguard.PeerResult{WorkerID: int64(i), Addr: fmt.Sprintf("10.0.0.%d:8080", i)})
	}
	f.snap.Peers.Reachable = 10
	b.ReportAllocs()
	for b.Loop() {
		f.m.WritePrometheus(io.Discard)
	}
}

// BenchmarkServerID: GET /id through the server's handler, without and with
// these metrics as the observer.
func BenchmarkServerID(b *testing.B) {
	for _, withMetrics := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", withMetrics), func(b *testing.B) {
			clk := clock.NewSystem()
			gen, err := snowflake.NewGenerator(snowflake.Config{Layout: snowflake.DefaultLayout(), WorkerID: 1, Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			guard := health.New(nopLog, nil)
			guard.Check(health.ReasonNTPOffset).Pass()
			cfg := server.Config{IDs: gen, Guard: guard, Clock: clk, Log: nopLog}
			if withMetrics {
				m, err := New(Config{Snapshot: liveSnapshot(gen, guard, clk)})
				if err != nil {
					b.Fatal(err)
				}
				cfg.Observer = m
			}
			srv, err := server.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			h := srv.Handler()
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.Header.SetMethod(fasthttp.MethodGet)
			ctx.Request.SetRequestURI("/id")
			b.ReportAllocs()
			for b.Loop() {
				h(ctx)
				ctx.ResetUserValues()
				ctx.Response.Reset()
			}
		})
	}
}
