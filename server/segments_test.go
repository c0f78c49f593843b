package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fakeSegments hands out 1, 2, 3… for tag "orders"; err, when set, fails.
type fakeSegments struct {
	mu    sync.Mutex
	next  int64
	err   error
	ready bool
}

func (f *fakeSegments) TakeWithToken(_ context.Context, tag string, _ []byte, dst []int64, n int) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return dst, f.err
	}
	if tag != "orders" {
		return dst, fmt.Errorf("tag %q: %w", tag, segment.ErrUnknownTag)
	}
	for range n {
		f.next++
		dst = append(dst, f.next)
	}
	return dst, nil
}

// checkAnswer GETs uri and checks its status and, for a 200, its exact
// body, content type and Cache-Control: no-store; for an error, that body
// is its code and its message contains msg.
func checkAnswer(t *testing.T, f *fixture, uri string, status int, body, ct, msg string) {
	t.Helper()
	r := f.do(t, "GET", uri)
	switch {
	case r.status != status:
		t.Errorf("GET %s: %d %s, want %d", uri, r.status, r.body, status)
	case status == 200:
		if string(r.body) != body || r.contentType != ct || r.cacheControl != "no-store" {
			t.Errorf("GET %s: %q (%s, cache %q), want %q (%s)", uri, r.body, r.contentType, r.cacheControl, body, ct)
		}
	default:
		if e := decodeError(t, r); e.Code != body || !strings.Contains(e.Message, msg) {
			t.Errorf("GET %s: code %q (%s), want %q with %q", uri, e.Code, e.Message, body, msg)
		}
	}
}

func (f *fakeSegments) Ready() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.ready }

func TestSegmentEndpoints(t *testing.T) {
	seg := &fakeSegments{ready: true}
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) { c.Segments = seg }).serve(t)
	// Segment mode does not depend on the clock guard.
	f.check.Fail("test: clock suspect")
	for _, tc := range []struct {
		uri    string
		status int
		body   string // exact body for 200s, error code otherwise
		ct     string
	}{
		{"/segment/orders", 200, "1", "text/plain; charset=utf-8"},
		{"/segment/orders?count=3", 200, "2\n3\n4\n", "text/plain; charset=utf-8"},
		{"/segment/orders?format=json", 200, `{"id":5,"id_str":"5"}`, "application/json"},
		{"/segment/orders?count=2&format=json", 200, `["6","7"]`, "application/json"},
		{"/api/segment/get/orders", 200, "8", "text/plain; charset=utf-8"},
		{"/api/segment/get/orders?anything=ignored", 200, "9", "text/plain; charset=utf-8"},
		{"/segment/orders?format=base62", 200, "0000000000A", "text/plain; charset=utf-8"},
		{"/segment/orders?count=2&format=base32", 200, "000000000000B\n000000000000C\n", "text/plain; charset=utf-8"},
		{"/api/segment/get/orders?format=base62", 200, "13", "text/plain; charset=utf-8"}, // Leaf's path ignores the query
		{"/segment/orders?format=base64", 400, "invalid_format", ""},
		{"/segment/orders?count=0", 400, "invalid_count", ""},
		{"/segment/orders?count=abc", 400, "invalid_count", ""},
		{"/segment/orders?count=10001", 400, "invalid_count", ""},
		{"/segment/orders?format=xml", 400, "invalid_format", ""},
		{"/segment/orders?cnt=3", 400, "invalid_parameter", ""},
		{"/segment/nope", 404, "unknown_tag", ""},
		{"/api/segment/get/nope", 404, "unknown_tag", ""},
		{"/segment/", 400, "invalid_tag", ""},
		{"/segment", 400, "invalid_tag", ""},
		{"/segment/a%20b", 400, "invalid_tag", ""},
		{"/segment/..", 404, "not_found", ""}, // the URL path is normalised to /: no tag reaches the handler
		{"/segment/.", 400, "invalid_tag", ""},
		{"/segment/%2e%2e", 404, "not_found", ""},
		{"/segment/" + strings.Repeat("x", segment.MaxTagLen+1), 400, "invalid_tag", ""},
	} {
		checkAnswer(t, f, tc.uri, tc.status, tc.body, tc.ct, "")
	}
	if r := f.do(t, "POST", "/segment/orders"); r.status != 405 {
		t.Errorf("POST /segment/orders: %d", r.status)
	}
	if r := f.do(t, "GET", "/readyz/segment"); r.status != 200 || !strings.Contains(string(r.body), `"mode":"segment"`) {
		t.Errorf("/readyz/segment while segment mode is ready (clock out): %d %s", r.status, r.body)
	}
	if r := f.do(t, "GET", "/readyz"); r.status != 503 {
		t.Errorf("/readyz with the clock out: %d, want 503 (snowflake mode)", r.status)
	}
	seg.mu.Lock()
	seg.err, seg.ready = fmt.Errorf("%w: tag %q: zookeeper unreachable", segment.ErrUnavailable, "orders"), false
	seg.mu.Unlock()
	r := f.do(t, "GET", "/segment/orders")
	if e := decodeError(t, r); r.status != 503 || e.Code != "segment_unavailable" || r.retryAfter == "" {
		t.Errorf("unavailable: %d %s (Retry-After %q), want 503 segment_unavailable with Retry-After", r.status, r.body, r.retryAfter)
	}
	if r := f.do(t, "GET", "/readyz/segment"); r.status != 503 || r.retryAfter == "" {
		t.Errorf("/readyz/segment without ZooKeeper: %d %s", r.status, r.body)
	}
	seg.mu.Lock()
	seg.err = fmt.Errorf("tag %q: %w: all 900000 numbers of 6 digits are handed out", "orders", segment.ErrExhausted)
	seg.mu.Unlock()
	r = f.do(t, "GET", "/segment/orders")
	if e := decodeError(t, r); r.status != 503 || e.Code != "tag_exhausted" || !strings.Contains(e.Message, "handed out") {
		t.Errorf("exhausted: %d %s, want 503 tag_exhausted", r.status, r.body)
	}
}

func TestSegmentEndpointsOff(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	for _, uri := range []string{"/segment/orders", "/api/segment/get/orders", "/readyz/segment"} {
		r := f.do(t, "GET", uri)
		if e := decodeError(t, r); r.status != 404 || e.Code != "segments_off" {
			t.Errorf("GET %s on a standalone node: %d %s, want 404 segments_off", uri, r.status, r.body)
		}
	}
}

// tokenStore is a segment store in memory whose tag "secret" requires the
// token in good and takes at most 5 IDs a request; "orders" is plain.
type tokenStore struct {
	benchStore
	good        string
	unconfirmed atomic.Bool // Tokens answers ErrTokensUnconfirmed (ZooKeeper cut off too long)
}

func (s *tokenStore) Tag(_ context.Context, tag string) (segment.Tag, error) {
	t := segment.Tag{Name: tag, Start: 1, MaxID: 1, Step: 1000, MaxStep: 1_000_000, Incarnation: 7}
	if tag == "secret" {
		t.RequireToken, t.MaxCount = true, 5
	}
	return t, nil
}

func (s *tokenStore) Alloc(ctx context.Context, tag string, inc, step, above int64) (segment.Range, segment.Tag, error) {
	r, _, err := s.benchStore.Alloc(ctx, tag, inc, step, above)
	t, _ := s.Tag(ctx, tag)
	t.MaxID = r.Hi
	return r, t, err
}

func (s *tokenStore) Tokens(_ context.Context, tag string, inc int64) (segment.TokenSet, error) {
	if s.unconfirmed.Load() {
		return segment.TokenSet{}, fmt.Errorf("%w: tag %q: token hashes last read 11s ago, past the token stale limit 10s", segment.ErrTokensUnconfirmed, tag)
	}
	return segment.TokenSet{Incarnation: inc, Hashes: []segment.TokenHash{{SHA256: segment.HashToken([]byte(s.good))}}}, nil
}

// doHeader is f.do with one request header set (none when name is "").
func doHeader(t *testing.T, f *fixture, uri, name, value string) response {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	t.Cleanup(func() { fasthttp.ReleaseRequest(req); fasthttp.ReleaseResponse(resp) })
	req.SetRequestURI("http://snowflaked.test" + uri)
	if name != "" {
		req.Header.Set(name, value)
	}
	if err := f.client.DoTimeout(req, resp, 10*time.Second); err != nil {
		t.Fatalf("GET %s: %v", uri, err)
	}
	return response{status: resp.StatusCode(), contentType: string(resp.Header.ContentType()),
		allow: string(resp.Header.Peek("WWW-Authenticate")), retryAfter: string(resp.Header.Peek("Retry-After")),
		body: append([]byte(nil), resp.Body()...)}
}

// TestSegmentTokens runs a real segment service: a tag that requires a
// token answers 401 token_required without one, 403 token_invalid with a
// wrong one, IDs with the right one (Bearer, or ?token= on the Leaf path
// only), and 400 invalid_count above its ceiling; a plain tag needs none.
func TestSegmentTokens(t *testing.T) {
	good := segment.NewToken()
	store := &tokenStore{good: good}
	svc, err := segment.New(segment.Config{Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = svc.Close(context.Background()) })
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) { c.Segments = readySegments{svc} }).serve(t)
	bearer := "Bearer " + good
	for _, tc := range []struct {
		name, uri, header, value string
		status                   int
		code                     string // error code ("" for a 200)
	}{
		{"no token", "/segment/secret", "", "", 401, "token_required"},
		{"no token, leaf", "/api/segment/get/secret", "", "", 401, "token_required"},
		{"wrong token", "/segment/secret", "Authorization", "Bearer " + segment.NewToken(), 403, "token_invalid"},
		{"wrong token, leaf query", "/api/segment/get/secret?token=nope", "", "", 403, "token_invalid"},
		{"empty bearer", "/segment/secret", "Authorization", "Bearer ", 400, "invalid_parameter"},
		{"other scheme", "/segment/secret", "Authorization", "Basic dXNlcjpwYXNz", 400, "invalid_parameter"},
		{"token twice", "/api/segment/get/secret?token=" + good, "Authorization", bearer, 400, "invalid_parameter"},
		{"query token off the leaf path", "/segment/secret?token=" + good, "", "", 400, "invalid_parameter"},
		{"good token", "/segment/secret", "Authorization", bearer, 200, ""},
		{"good token, lower-case scheme", "/segment/secret", "Authorization", "bearer " + good, 200, ""},
		{"good token, leaf query", "/api/segment/get/secret?token=" + good, "", "", 200, ""},
		{"good token, leaf bearer", "/api/segment/get/secret", "Authorization", bearer, 200, ""},
		{"at the ceiling", "/segment/secret?count=5", "Authorization", bearer, 200, ""},
		{"above the ceiling", "/segment/secret?count=6", "Authorization", bearer, 400, "invalid_count"},
		{"plain tag, no token", "/segment/orders", "", "", 200, ""},
		{"plain tag, any token", "/segment/orders", "Authorization", "Bearer whatever", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := doHeader(t, f, tc.uri, tc.header, tc.value)
			if r.status != tc.status {
				t.Fatalf("GET %s (%s: %q): %d %s, want %d", tc.uri, tc.header, tc.value, r.status, r.body, tc.status)
			}
			if tc.code == "" {
				return
			}
			e := decodeError(t, r)
			if e.Code != tc.code || strings.Contains(string(r.body), good) {
				t.Errorf("GET %s: code %q (%s), want %q and no token in the body", tc.uri, e.Code, e.Message, tc.code)
			}
			if tc.status == 401 && !strings.HasPrefix(r.allow, "Bearer") {
				t.Errorf("GET %s: 401 without WWW-Authenticate: Bearer (%q)", tc.uri, r.allow)
			}
			if tc.code == "invalid_count" && (!strings.Contains(e.Message, "at most 5") || e.TagMax == nil || *e.TagMax != 5) {
				t.Errorf("GET %s: %q, tag_max %v: want the ceiling 5 named and in tag_max", tc.uri, e.Message, e.TagMax)
			}
		})
	}
	var refused map[string]int64
	for _, ts := range svc.Status() {
		if ts.Tag == "secret" {
			refused = map[string]int64{"token_required": ts.RefusedRequired, "token_invalid": ts.RefusedInvalid}
		}
	}
	if refused["token_required"] != 2 || refused["token_invalid"] != 2 {
		t.Errorf("refusals counted %v, want 2 token_required and 2 token_invalid", refused)
	}

	// Tokens it cannot confirm (ZooKeeper cut off past --token-stale-limit)
	// serve nobody: 503 tokens_unconfirmed, with Retry-After, whatever the
	// token; once confirmed again, the right one serves.
	store.unconfirmed.Store(true)
	for _, uri := range []string{"/segment/secret", "/api/segment/get/secret"} {
		for _, token := range []string{good, segment.NewToken()} {
			r := doHeader(t, f, uri, "Authorization", "Bearer "+token)
			if e := decodeError(t, r); r.status != 503 || e.Code != "tokens_unconfirmed" || r.retryAfter == "" || strings.Contains(string(r.body), good) {
				t.Errorf("GET %s, tokens unconfirmed: %d %s (Retry-After %q), want 503 tokens_unconfirmed with Retry-After", uri, r.status, r.body, r.retryAfter)
			}
		}
	}
	store.unconfirmed.Store(false)
	if r := doHeader(t, f, "/segment/secret", "Authorization", bearer); r.status != 200 {
		t.Errorf("GET /segment/secret, tokens confirmed again: %d %s, want 200", r.status, r.body)
	}
}

// With Config.APITokens the snowflake endpoints need one of them (401
// without, 403 with another); the others, and the segment endpoints, do
// not.
func TestAPITokens(t *testing.T) {
	good := segment.NewToken()
	set := &segment.TokenSet{Hashes: []segment.TokenHash{{SHA256: segment.HashToken([]byte(good))}}}
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) { c.APITokens = set; c.Segments = &fakeSegments{ready: true} }).serve(t)
	for _, uri := range []string{"/id", "/ids?count=2", "/uuid", "/uuids?count=2", "/api/snowflake/get/k"} {
		for _, tc := range []struct {
			name, value string
			status      int
			code        string
		}{
			{"no token", "", 401, "token_required"},
			{"wrong token", "Bearer " + segment.NewToken(), 403, "token_invalid"},
			{"not bearer", "Basic eDp5", 400, "invalid_parameter"},
			{"its token", "Bearer " + good, 200, ""},
		} {
			header := "Authorization"
			if tc.value == "" {
				header = ""
			}
			r := doHeader(t, f, uri, header, tc.value)
			if r.status != tc.status {
				t.Errorf("GET %s, %s: %d %s, want %d", uri, tc.name, r.status, r.body, tc.status)
				continue
			}
			if tc.code != "" {
				if e := decodeError(t, r); e.Code != tc.code {
					t.Errorf("GET %s, %s: code %q, want %q", uri, tc.name, e.Code, tc.code)
				}
			}
		}
	}
	for _, uri := range []string{"/healthz", "/readyz", "/decode/1", "/clock", "/segment/orders", "/time"} {
		if r := doHeader(t, f, uri, "", ""); r.status == 401 || r.status == 403 {
			t.Errorf("GET %s without a token: %d, want no token needed", uri, r.status)
		}
	}
}

// periodSegments is fakeSegments that also serves "daily", a reset tag
// printed {date:yyyy-MM-dd}/{seq:4} in period 2026-12-07, of which number
// 9999 is the last.
type periodSegments struct {
	fakeSegments
	rule      *segment.ResetRule
	dailyNext int64
}

func (p *periodSegments) TakePeriod(ctx context.Context, tag string, token []byte, dst []int64, n int) ([]int64, segment.Period, error) {
	if tag != "daily" {
		dst, err := p.TakeWithToken(ctx, tag, token, dst, n)
		return dst, segment.Period{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dailyNext+int64(n) > p.rule.Limit() {
		return dst, segment.Period{}, &segment.PeriodExhaustedError{Tag: tag, Period: "2026-12-07", Width: p.rule.Width(), Limit: p.rule.Limit()}
	}
	for range n {
		p.dailyNext++
		dst = append(dst, p.dailyNext)
	}
	return dst, segment.NewPeriod(p.rule, "2026-12-07"), nil
}

func (p *periodSegments) Resets(_ context.Context, tag string) (bool, error) {
	return tag == "daily", nil
}

// A reset tag's IDs print in its format as text, JSON (with the period
// and the number apart) and batches; a base format is refused before any
// number is taken; a period out of numbers is 503 period_exhausted naming
// the width.
func TestSegmentResetTag(t *testing.T) {
	rule, err := segment.Reset{Every: segment.EveryDay, Format: "D{date:yyyy-MM-dd}/{seq:4}"}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	seg := &periodSegments{fakeSegments: fakeSegments{ready: true}, rule: rule}
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) { c.Segments = seg }).serve(t)
	for _, tc := range []struct {
		uri    string
		status int
		body   string // exact body for 200s, error code otherwise
		ct     string
	}{
		{"/segment/daily", 200, "D2026-12-07/0001", "text/plain; charset=utf-8"},
		{"/segment/daily?count=2", 200, "D2026-12-07/0002\nD2026-12-07/0003\n", "text/plain; charset=utf-8"},
		{"/segment/daily?format=json", 200, `{"id_str":"D2026-12-07/0004","period":"2026-12-07","number":4}`, "application/json"},
		{"/segment/daily?count=2&format=json", 200, `["D2026-12-07/0005","D2026-12-07/0006"]`, "application/json"},
		{"/api/segment/get/daily", 200, "D2026-12-07/0007", "text/plain; charset=utf-8"},
		{"/segment/daily?format=base62", 400, "invalid_format", ""},
		{"/segment/daily?count=3&format=base36", 400, "invalid_format", ""},
		{"/segment/daily", 200, "D2026-12-07/0008", "text/plain; charset=utf-8"}, // the refusals took no number
		{"/segment/orders", 200, "1", "text/plain; charset=utf-8"},
		{"/segment/orders?format=base62", 200, "00000000002", "text/plain; charset=utf-8"},
	} {
		checkAnswer(t, f, tc.uri, tc.status, tc.body, tc.ct, "resets by period")
	}
	seg.mu.Lock()
	seg.dailyNext = 9998
	seg.mu.Unlock()
	if r := f.do(t, "GET", "/segment/daily"); r.status != 200 || string(r.body) != "D2026-12-07/9999" {
		t.Fatalf("the last number: %d %s", r.status, r.body)
	}
	r := f.do(t, "GET", "/segment/daily")
	if e := decodeError(t, r); r.status != 503 || e.Code != "period_exhausted" || !strings.Contains(e.Message, "4 digits") || r.retryAfter == "" {
		t.Errorf("past the width: %d %s, want 503 period_exhausted naming 4 digits", r.status, r.body)
	}
}
