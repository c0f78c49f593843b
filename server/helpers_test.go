package server

import (
	"bytes"
	"codeberg.org/snowflaked/snowflaked/internal/endpoint"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// testWorker is the worker ID of the fixtures' generators.
const testWorker = 7

// fakeNow is the wall time of the fixtures' Config.Clock (not the
// generator's clock): /time and /clock must report exactly this.
var fakeNow = time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)

// fixture is a server with a real generator and a real guard.
type fixture struct {
	srv    *Server
	gen    *snowflake.Generator
	guard  *health.Guard
	check  *health.Check    // the guard's only check; passing unless a test fails it
	clk    *clocktest.Fake  // Config.Clock
	client *fasthttp.Client // nil until serve
	ln     *fasthttputil.InmemoryListener
}

// newFixture builds a server; mod may change the config before New.
func newFixture(t testing.TB, layout snowflake.Layout, mod func(*Config)) *fixture {
	t.Helper()
	gen, err := snowflake.NewGenerator(snowflake.Config{Layout: layout, WorkerID: testWorker, Clock: clock.NewSystem()})
	if err != nil {
		t.Fatalf("new generator: %v", err)
	}
	guard := health.New(zerolog.Nop(), nil)
	check := guard.Check(health.ReasonNTPOffset)
	check.Pass()
	f := &fixture{gen: gen, guard: guard, check: check, clk: clocktest.NewFake(fakeNow)}
	cfg := Config{IDs: gen, Guard: guard, Clock: f.clk, Log: zerolog.Nop()}
	if mod != nil {
		mod(&cfg)
	}
	f.srv, err = New(cfg)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	return f
}

// serve starts the server on an in-memory listener and returns the fixture
// with a client dialing it; Cleanup shuts both down.
func (f *fixture) serve(t testing.TB) *fixture {
	t.Helper()
	f.client, f.ln = serveOn(t, f.srv)
	return f
}

// servable is a server serveOn runs: the node's Server or the start
// phase's Starting.
type servable interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// serveOn serves s on an in-memory listener until the test ends.
func serveOn(t testing.TB, s servable) (*fasthttp.Client, *fasthttputil.InmemoryListener) {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("serve did not return after shutdown")
		}
		_ = ln.Close()
	})
	return &fasthttp.Client{
		Dial:            func(string) (net.Conn, error) { return ln.Dial() },
		MaxConnsPerHost: 64,
	}, ln
}

// response is what a test looks at.
type response struct {
	status       int
	contentType  string
	retryAfter   string
	allow        string
	cacheControl string
	body         []byte
}

// do sends method uri (path and query, sent as is) and returns the response.
func (f *fixture) do(t testing.TB, method, uri string) response {
	t.Helper()
	return doOn(t, f.client, method, uri)
}

func doOn(t testing.TB, c *fasthttp.Client, method, uri string) response {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.URI().DisablePathNormalizing = true
	req.SetRequestURI("http://snowflaked.test" + uri)
	req.Header.SetMethod(method)
	if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	return response{
		status:       resp.StatusCode(),
		contentType:  string(resp.Header.ContentType()),
		retryAfter:   string(resp.Header.Peek("Retry-After")),
		allow:        string(resp.Header.Peek("Allow")),
		cacheControl: string(resp.Header.Peek("Cache-Control")),
		body:         append([]byte(nil), resp.Body()...),
	}
}

// apiError is the decoded {"error":{…}} body.
type apiError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Reason  *string `json:"reason"`
	State   *string `json:"state"`
	Max     *int    `json:"max"`     // only with invalid_count: the node's MaxBatch
	TagMax  *int    `json:"tag_max"` // only with invalid_count from a tag's ceiling
}

// decodeError checks that r is a JSON error and returns it.
func decodeError(t testing.TB, r response) apiError {
	t.Helper()
	if r.contentType != "application/json" {
		t.Fatalf("error content type %q, want application/json (body %s)", r.contentType, r.body)
	}
	var e struct {
		Error *apiError `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil {
		t.Fatalf("error body %s is not {\"error\":{…}}: %v", r.body, err)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error body %s lacks code or message", r.body)
	}
	if (e.Error.Max != nil) != (e.Error.Code == codeInvalidCount) || (e.Error.Max != nil && *e.Error.Max < 1) {
		t.Fatalf("error body %s: want a positive max with invalid_count, and only then", r.body)
	}
	return *e.Error
}

// fakeIDs is an IDSource that fails with err (when set) and counts calls;
// afterAppend, when set, runs after every AppendN (outside its lock).
type fakeIDs struct {
	layout      snowflake.Layout
	mu          sync.Mutex
	err         error
	next        int64
	calls       atomic.Int64
	afterAppend func(n int)
}

func (f *fakeIDs) Next() (int64, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, f.err
	}
	f.next++
	return f.next, nil
}

func (f *fakeIDs) AppendN(dst []int64, n int) ([]int64, error) {
	f.calls.Add(1)
	if f.afterAppend != nil {
		defer f.afterAppend(n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return dst, f.err
	}
	for range n {
		f.next++
		dst = append(dst, f.next)
	}
	return dst, nil
}

// NextGene and AppendNGene ignore the gene: the fake has no gene bits.
func (f *fakeIDs) NextGene(uint64) (int64, error) { return f.Next() }

func (f *fakeIDs) AppendNGene(dst []int64, n int, _ uint64) ([]int64, error) {
	return f.AppendN(dst, n)
}

func (f *fakeIDs) Layout() snowflake.Layout { return f.layout }

// recordingObserver records what the server reports.
type recordingObserver struct {
	mu       sync.Mutex
	requests []string // "endpoint status"
	issued   int
}

func (o *recordingObserver) Request(endpoint endpoint.Endpoint, status int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests = append(o.requests, endpoint.String()+" "+strconv.Itoa(status))
}

func (o *recordingObserver) IssuedIDs(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.issued += n
}

func (o *recordingObserver) snapshot() ([]string, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.requests...), o.issued
}

// countingObserver counts without allocating.
type countingObserver struct{ requests, issued atomic.Int64 }

func (o *countingObserver) Request(endpoint.Endpoint, int) { o.requests.Add(1) }
func (o *countingObserver) IssuedIDs(n int)                { o.issued.Add(int64(n)) }

var errTest = errors.New("test error")
