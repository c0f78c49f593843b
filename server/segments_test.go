package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

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

func (f *fakeSegments) Take(_ context.Context, tag string, dst []int64, n int) ([]int64, error) {
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
		r := f.do(t, "GET", tc.uri)
		if r.status != tc.status {
			t.Errorf("GET %s: %d %s, want %d", tc.uri, r.status, r.body, tc.status)
			continue
		}
		if tc.status == 200 {
			if string(r.body) != tc.body || r.contentType != tc.ct || r.cacheControl != "no-store" {
				t.Errorf("GET %s: %q (%s, cache %q), want %q (%s)", tc.uri, r.body, r.contentType, r.cacheControl, tc.body, tc.ct)
			}
			continue
		}
		if e := decodeError(t, r); e.Code != tc.body {
			t.Errorf("GET %s: code %q (%s), want %q", tc.uri, e.Code, e.Message, tc.body)
		}
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
