package server

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// benchLayouts: the default layout caps one worker at 4096 IDs per ms (a
// floor of ~244 ns per ID, whatever the handler costs); the wide one
// (2^19 IDs per ms) shows the handler's own cost.
var benchLayouts = []struct {
	name   string
	layout snowflake.Layout
}{
	{"layout=41/10/12", snowflake.DefaultLayout()},
	{"layout=41/3/19", snowflake.Layout{TimeBits: 41, WorkerBits: 3, SequenceBits: 19, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond}},
}

// benchHandler calls h for uri with a reused RequestCtx, reset as
// fasthttp's server does between requests.
func benchHandler(b *testing.B, h fasthttp.RequestHandler, uri string) {
	b.Helper()
	ctx := newRequestCtx("GET", uri)
	h(ctx)
	if ctx.Response.StatusCode() != 200 {
		b.Fatalf("GET %s: %d %s", uri, ctx.Response.StatusCode(), ctx.Response.Body())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resetCtx(ctx)
		h(ctx)
	}
	b.StopTimer()
	if ctx.Response.StatusCode() != 200 {
		b.Fatalf("GET %s: %d %s", uri, ctx.Response.StatusCode(), ctx.Response.Body())
	}
}

// BenchmarkHandlerID is GET /id through the router, in-process.
func BenchmarkHandlerID(b *testing.B) {
	for _, l := range benchLayouts {
		b.Run(l.name, func(b *testing.B) {
			f := newFixture(b, l.layout, nil)
			benchHandler(b, f.srv.Handler(), "/id")
		})
	}
	b.Run("layout=41/3/19/parallel", func(b *testing.B) {
		f := newFixture(b, benchLayouts[1].layout, nil)
		h := f.srv.Handler()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := newRequestCtx("GET", "/id")
			for pb.Next() {
				resetCtx(ctx)
				h(ctx)
			}
		})
	})
}

// BenchmarkBareHandler is a handler that writes a constant: the floor of
// what fasthttp's request/response handling costs in-process.
func BenchmarkBareHandler(b *testing.B) {
	body := []byte("123456789012345678")
	benchHandler(b, func(ctx *fasthttp.RequestCtx) {
		ctx.Response.Header.SetContentTypeBytes(ctText)
		ctx.SetBody(body)
	}, "/id")
}

// BenchmarkHandlerIDs1000 is GET /ids?count=1000 (text), in-process.
func BenchmarkHandlerIDs1000(b *testing.B) {
	for _, l := range benchLayouts {
		b.Run(l.name, func(b *testing.B) {
			f := newFixture(b, l.layout, nil)
			benchHandler(b, f.srv.Handler(), "/ids?count=1000")
		})
	}
}

// benchStore is a segment.Store in memory for the benchmarks.
type benchStore struct {
	mu  sync.Mutex
	max int64
}

func (s *benchStore) Alloc(_ context.Context, tag string, _, step, _ int64) (segment.Range, segment.Tag, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := segment.Range{Lo: s.max + 1, Hi: s.max + 1 + step}
	s.max = r.Hi - 1
	return r, segment.Tag{Name: tag, Start: 1, MaxID: r.Hi, Step: 1000, MaxStep: 1_000_000}, nil
}
func (s *benchStore) Return(context.Context, string, int64, segment.Range) error { return nil }
func (s *benchStore) Tag(_ context.Context, tag string) (segment.Tag, error) {
	return segment.Tag{Name: tag, Start: 1, MaxID: 1, Step: 1000, MaxStep: 1_000_000}, nil
}
func (s *benchStore) Publish(context.Context, string, string, []segment.Range) error { return nil }

type readySegments struct{ *segment.Service }

func (readySegments) Ready() bool { return true }

// BenchmarkHandlerSegment is GET /segment/{tag} through the router with a
// real segment service (state file on disk, store in memory), in-process;
// compare with BenchmarkHandlerID in the same run.
func BenchmarkHandlerSegment(b *testing.B) {
	svc, err := segment.New(segment.Config{Store: &benchStore{}, StateFile: filepath.Join(b.TempDir(), "seg.json")})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close(context.Background())
	f := newFixture(b, benchLayouts[1].layout, func(c *Config) { c.Segments = readySegments{svc} })
	benchHandler(b, f.srv.Handler(), "/segment/orders")
}
