package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// parseIDText parses a decimal ID and checks it belongs to the test worker.
func parseIDText(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		t.Fatalf("%q is not a positive decimal ID: %v", s, err)
	}
	p, err := snowflake.DefaultLayout().Decode(id)
	if err != nil || p.WorkerID != testWorker {
		t.Fatalf("ID %d decodes to %+v, %v: want worker %d", id, p, err, testWorker)
	}
	return id
}

// checkIncreasing fails unless ids are strictly increasing.
func checkIncreasing(t *testing.T, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("IDs not strictly increasing at %d: %d then %d", i, ids[i-1], ids[i])
		}
	}
}

func TestEndpointsSuccess(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.Routes = map[string]fasthttp.RequestHandler{
			"/metrics": func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("# metrics\n") },
		}
	}).serve(t)

	textIDs := func(n int) func(t *testing.T, body []byte) {
		return func(t *testing.T, body []byte) {
			s := string(body)
			if !strings.HasSuffix(s, "\n") {
				t.Fatalf("body %q does not end in a newline", s)
			}
			lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
			if len(lines) != n {
				t.Fatalf("got %d lines, want %d", len(lines), n)
			}
			ids := make([]int64, len(lines))
			for i, l := range lines {
				ids[i] = parseIDText(t, l)
			}
			checkIncreasing(t, ids)
		}
	}
	jsonIDs := func(n int) func(t *testing.T, body []byte) {
		return func(t *testing.T, body []byte) {
			var strs []string
			if err := json.Unmarshal(body, &strs); err != nil {
				t.Fatalf("body %q is not a JSON array of strings: %v", body, err)
			}
			if len(strs) != n {
				t.Fatalf("got %d IDs, want %d", len(strs), n)
			}
			ids := make([]int64, len(strs))
			for i, s := range strs {
				ids[i] = parseIDText(t, s)
			}
			checkIncreasing(t, ids)
		}
	}
	oneID := func(t *testing.T, body []byte) { parseIDText(t, string(body)) }
	exactJSON := func(want string) func(t *testing.T, body []byte) {
		return func(t *testing.T, body []byte) {
			if string(body) != want {
				t.Fatalf("body %s, want %s", body, want)
			}
		}
	}

	tests := []struct {
		name, method, uri string
		wantCT            string
		check             func(t *testing.T, body []byte)
	}{
		{"id text", "GET", "/id", "text/plain; charset=utf-8", oneID},
		{"id format=text", "GET", "/id?format=text", "text/plain; charset=utf-8", oneID},
		{"id format=json", "GET", "/id?format=json", "application/json", func(t *testing.T, body []byte) {
			var v struct {
				ID    int64  `json:"id"`
				IDStr string `json:"id_str"`
			}
			dec := json.NewDecoder(strings.NewReader(string(body)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			if parseIDText(t, v.IDStr) != v.ID {
				t.Fatalf("id %d and id_str %q differ", v.ID, v.IDStr)
			}
		}},
		{"ids 1", "GET", "/ids?count=1", "text/plain; charset=utf-8", textIDs(1)},
		{"ids 5", "GET", "/ids?count=5", "text/plain; charset=utf-8", textIDs(5)},
		{"ids leading zeros", "GET", "/ids?count=007", "text/plain; charset=utf-8", textIDs(7)},
		{"ids max batch", "GET", "/ids?count=10000", "text/plain; charset=utf-8", textIDs(10000)},
		{"ids format first", "GET", "/ids?format=text&count=3", "text/plain; charset=utf-8", textIDs(3)},
		{"ids json", "GET", "/ids?count=5&format=json", "application/json", jsonIDs(5)},
		{"ids json 5000 spans ticks", "GET", "/ids?count=5000&format=json", "application/json", jsonIDs(5000)},
		{"leaf", "GET", "/api/snowflake/get/leaf-segment-test", "text/plain; charset=utf-8", oneID},
		{"leaf ignores query", "GET", "/api/snowflake/get/k?whatever=1&format=json", "text/plain; charset=utf-8", oneID},
		{"leaf key with slash", "GET", "/api/snowflake/get/a/b", "text/plain; charset=utf-8", oneID},
		{"healthz", "GET", "/healthz", "application/json", exactJSON(`{"status":"ok"}`)},
		{"readyz", "GET", "/readyz", "application/json", exactJSON(`{"state":"in_service"}`)},
		{"time uses injected clock", "GET", "/time", "application/json",
			exactJSON(`{"unix_ms":` + strconv.FormatInt(fakeNow.UnixMilli(), 10) + `,"unix_ns":` + strconv.FormatInt(fakeNow.UnixNano(), 10) + `}`)},
		{"clock minimal", "GET", "/clock", "application/json",
			exactJSON(`{"now_ms":` + strconv.FormatInt(fakeNow.UnixMilli(), 10) + `,"state":"in_service","reason":""}`)},
		{"decode", "GET", "/decode/" + strconv.FormatInt(snowflake.DefaultLayout().Compose(1000, 3, 9), 10), "application/json",
			exactJSON(`{"id":"` + strconv.FormatInt(snowflake.DefaultLayout().Compose(1000, 3, 9), 10) +
				`","timestamp_ms":` + strconv.FormatInt(snowflake.DefaultEpoch.UnixMilli()+1000, 10) +
				`,"time":"2024-01-01T00:00:01Z","worker_id":3,"sequence":9}`)},
		{"decode zero", "GET", "/decode/0", "application/json",
			exactJSON(`{"id":"0","timestamp_ms":` + strconv.FormatInt(snowflake.DefaultEpoch.UnixMilli(), 10) +
				`,"time":"2024-01-01T00:00:00Z","worker_id":0,"sequence":0}`)},
		{"decode max int64", "GET", "/decode/9223372036854775807", "application/json", func(t *testing.T, body []byte) {
			if !strings.Contains(string(body), `"worker_id":1023,"sequence":4095}`) {
				t.Fatalf("body %s", body)
			}
		}},
		{"custom route", "GET", "/metrics", "text/plain; charset=utf-8", exactJSON("# metrics\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.uri)
			if r.status != fasthttp.StatusOK {
				t.Fatalf("status %d, want 200 (body %s)", r.status, r.body)
			}
			if r.contentType != tt.wantCT {
				t.Fatalf("content type %q, want %q", r.contentType, tt.wantCT)
			}
			if tt.uri != "/metrics" && r.cacheControl != "no-store" {
				t.Fatalf("Cache-Control %q, want no-store", r.cacheControl)
			}
			tt.check(t, r.body)
		})
	}
}

func TestHeadHasNoBody(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	tests := []struct{ uri, wantCT string }{
		{"/id", "text/plain; charset=utf-8"},
		{"/ids?count=3", "text/plain; charset=utf-8"},
		{"/healthz", "application/json"},
		{"/decode/5", "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			r := f.do(t, "HEAD", tt.uri)
			if r.status != fasthttp.StatusOK || r.contentType != tt.wantCT || len(r.body) != 0 {
				t.Fatalf("HEAD %s: status %d, content type %q, body %q; want 200, %q, empty", tt.uri, r.status, r.contentType, r.body, tt.wantCT)
			}
		})
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		layout snowflake.Layout
	}{
		{"default", snowflake.DefaultLayout()},
		{"js53", snowflake.JS53Layout()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.layout, nil).serve(t)
			r := f.do(t, "GET", "/id")
			if r.status != fasthttp.StatusOK {
				t.Fatalf("GET /id: %d %s", r.status, r.body)
			}
			id, err := strconv.ParseInt(string(r.body), 10, 64)
			if err != nil {
				t.Fatalf("GET /id body %q: %v", r.body, err)
			}
			r = f.do(t, "GET", "/decode/"+string(r.body))
			if r.status != fasthttp.StatusOK || r.contentType != "application/json" {
				t.Fatalf("decode: %d %q %s", r.status, r.contentType, r.body)
			}
			var got struct {
				ID          string `json:"id"`
				TimestampMS int64  `json:"timestamp_ms"`
				Time        string `json:"time"`
				WorkerID    int64  `json:"worker_id"`
				Sequence    int64  `json:"sequence"`
			}
			dec := json.NewDecoder(strings.NewReader(string(r.body)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("decode body %s: %v", r.body, err)
			}
			want, err := tt.layout.Decode(id)
			if err != nil {
				t.Fatal(err)
			}
			ts, err := time.Parse(time.RFC3339Nano, got.Time)
			if err != nil || !strings.HasSuffix(got.Time, "Z") {
				t.Fatalf("time %q is not RFC 3339 in UTC: %v", got.Time, err)
			}
			if got.ID != strconv.FormatInt(id, 10) || got.WorkerID != testWorker || got.Sequence != want.Sequence ||
				got.TimestampMS != want.UnixMilli() || !ts.Equal(want.Time) {
				t.Fatalf("decoded %+v, want %+v", got, want)
			}
			if age := time.Since(ts); age < -time.Second || age > time.Minute {
				t.Fatalf("decoded time %s is not about now", ts)
			}
		})
	}
}

func TestClockReport(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.ClockInfo = func() any { return map[string]any{"now_ms": 5, "fence_ms": 9, "state": "in_service"} }
	}).serve(t)
	r := f.do(t, "GET", "/clock")
	if r.status != fasthttp.StatusOK || r.contentType != "application/json" || string(r.body) != `{"fence_ms":9,"now_ms":5,"state":"in_service"}` {
		t.Fatalf("GET /clock: %d %q %s", r.status, r.contentType, r.body)
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.Routes = map[string]fasthttp.RequestHandler{
			"/panic": func(*fasthttp.RequestCtx) { panic("boom") },
		}
	}).serve(t)
	tests := []struct {
		name, method, uri string
		status            int
		code              string
		msgHas            []string // substrings of the message
	}{
		// /ids count
		{"count missing", "GET", "/ids", 400, "invalid_count", []string{"required", "1 to 10000"}},
		{"count empty", "GET", "/ids?count=", 400, "invalid_count", []string{`""`, "1 to 10000"}},
		{"count no value", "GET", "/ids?count", 400, "invalid_count", []string{`""`, "1 to 10000"}},
		{"count word", "GET", "/ids?count=abc", 400, "invalid_count", []string{`"abc"`, "1 to 10000"}},
		{"count zero", "GET", "/ids?count=0", 400, "invalid_count", []string{`"0"`, "1 to 10000"}},
		{"count zeros", "GET", "/ids?count=000", 400, "invalid_count", []string{`"000"`}},
		{"count negative", "GET", "/ids?count=-1", 400, "invalid_count", []string{`"-1"`, "1 to 10000"}},
		{"count plus", "GET", "/ids?count=%2B5", 400, "invalid_count", []string{`"+5"`}},
		{"count space", "GET", "/ids?count=%205", 400, "invalid_count", []string{`" 5"`}},
		{"count fraction", "GET", "/ids?count=1.5", 400, "invalid_count", []string{`"1.5"`}},
		{"count hex", "GET", "/ids?count=0x10", 400, "invalid_count", []string{`"0x10"`}},
		{"count exponent", "GET", "/ids?count=1e3", 400, "invalid_count", []string{`"1e3"`}},
		{"count too large", "GET", "/ids?count=10001", 400, "invalid_count", []string{`"10001"`, "1 to 10000"}},
		{"count overflow int64", "GET", "/ids?count=9223372036854775808", 400, "invalid_count", []string{`"9223372036854775808"`}},
		{"count overflow huge", "GET", "/ids?count=" + strings.Repeat("9", 100), 400, "invalid_count", []string{`"99999`, "…"}},
		{"count bad utf8", "GET", "/ids?count=%FF", 400, "invalid_count", []string{`"\xff"`}},
		// format
		{"id format xml", "GET", "/id?format=xml", 400, "invalid_format", []string{`"xml"`, "text, json, base62, base58, base36 or base32"}},
		{"id format empty", "GET", "/id?format=", 400, "invalid_format", []string{`""`}},
		{"id format upper", "GET", "/id?format=JSON", 400, "invalid_format", []string{`"JSON"`}},
		{"ids format bad", "GET", "/ids?count=2&format=csv", 400, "invalid_format", []string{`"csv"`}},
		// unknown / repeated parameters
		{"id unknown param", "GET", "/id?fromat=json", 400, "invalid_parameter", []string{`"fromat"`, "format"}},
		{"id count param", "GET", "/id?count=2", 400, "invalid_parameter", []string{`"count"`}},
		{"ids typo", "GET", "/ids?cout=5", 400, "invalid_parameter", []string{`"cout"`, "count, format and gene"}},
		{"ids extra", "GET", "/ids?count=5&x=1", 400, "invalid_parameter", []string{`"x"`}},
		{"ids empty name", "GET", "/ids?count=5&=1", 400, "invalid_parameter", []string{`""`}},
		{"ids repeated count", "GET", "/ids?count=1&count=2", 400, "invalid_parameter", []string{`"count"`, "more than once"}},
		{"id repeated format", "GET", "/id?format=json&format=json", 400, "invalid_parameter", []string{`"format"`, "more than once"}},
		// decode
		{"decode empty", "GET", "/decode/", 400, "invalid_id", []string{"required"}},
		{"decode bare", "GET", "/decode", 400, "invalid_id", []string{"required"}},
		{"decode word", "GET", "/decode/abc", 400, "invalid_id", []string{`"abc"`, "not a decimal"}},
		{"decode negative", "GET", "/decode/-1", 400, "invalid_id", []string{`"-1"`, "negative"}},
		{"decode minus only", "GET", "/decode/-", 400, "invalid_id", []string{`"-"`, "not a decimal"}},
		{"decode plus", "GET", "/decode/+1", 400, "invalid_id", []string{`"+1"`}},
		{"decode fraction", "GET", "/decode/1.5", 400, "invalid_id", []string{`"1.5"`}},
		{"decode int64 overflow", "GET", "/decode/9223372036854775808", 400, "invalid_id", []string{"too big"}},
		{"decode huge", "GET", "/decode/" + strings.Repeat("1", 40), 400, "invalid_id", []string{"too big"}},
		{"decode nested", "GET", "/decode/1/2", 400, "invalid_id", []string{`"1/2"`}},
		{"decode escaped space", "GET", "/decode/%201", 400, "invalid_id", []string{`" 1"`}},
		// leaf
		{"leaf empty key", "GET", "/api/snowflake/get/", 400, "invalid_key", []string{"key is required"}},
		{"leaf bare", "GET", "/api/snowflake/get", 400, "invalid_key", []string{"key is required"}},
		// 404
		{"unknown path", "GET", "/nope", 404, "not_found", []string{`"/nope"`}},
		{"trailing slash", "GET", "/id/", 404, "not_found", nil},
		{"case", "GET", "/ID", 404, "not_found", nil},
		{"root", "GET", "/", 404, "not_found", nil},
		{"unknown path POST", "POST", "/nope", 404, "not_found", nil},
		// 405
		{"POST id", "POST", "/id", 405, "method_not_allowed", []string{`"POST"`, "/id", "GET or HEAD"}},
		{"DELETE ids", "DELETE", "/ids?count=3", 405, "method_not_allowed", []string{`"DELETE"`, "/ids"}},
		{"PUT decode", "PUT", "/decode/1", 405, "method_not_allowed", []string{"/decode"}},
		{"POST leaf", "POST", "/api/snowflake/get/k", 405, "method_not_allowed", nil},
		{"OPTIONS healthz", "OPTIONS", "/healthz", 405, "method_not_allowed", nil},
		{"PATCH readyz", "PATCH", "/readyz", 405, "method_not_allowed", nil},
		{"POST time", "POST", "/time", 405, "method_not_allowed", nil},
		{"POST clock", "POST", "/clock", 405, "method_not_allowed", nil},
		{"POST uuids", "POST", "/uuids", 405, "method_not_allowed", []string{"/uuids"}},
		{"POST segment", "POST", "/segment/orders", 405, "method_not_allowed", []string{"/segment"}},
		{"POST segment bare", "POST", "/segment", 405, "method_not_allowed", []string{"/segment"}},
		{"PUT leaf segment bare", "PUT", "/api/segment/get", 405, "method_not_allowed", []string{"/api/segment/get"}},
		{"POST readyz segment", "POST", "/readyz/segment", 405, "method_not_allowed", []string{"/readyz/segment"}},
		// segment mode off: the tag is checked first only on the bare paths
		{"segment bare", "GET", "/segment", 400, "invalid_tag", []string{"tag is required: use /segment/{tag}"}},
		{"leaf segment bare", "GET", "/api/segment/get", 400, "invalid_tag", []string{"tag is required: use /api/segment/get/{tag}"}},
		{"segment off", "GET", "/segment/orders", 404, "segments_off", nil},
		// panic
		{"panic", "GET", "/panic", 500, "internal", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, tt.method, tt.uri)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d (body %s)", r.status, tt.status, r.body)
			}
			e := decodeError(t, r)
			if e.Code != tt.code {
				t.Fatalf("code %q, want %q (body %s)", e.Code, tt.code, r.body)
			}
			for _, s := range tt.msgHas {
				if !strings.Contains(e.Message, s) {
					t.Errorf("message %q lacks %q", e.Message, s)
				}
			}
			if e.Reason != nil || e.State != nil {
				t.Errorf("non-503 error carries reason/state: %s", r.body)
			}
			if wantAllow := tt.status == 405; wantAllow != (r.allow == "GET, HEAD") {
				t.Errorf("Allow header %q for status %d", r.allow, r.status)
			}
			if r.retryAfter != "" {
				t.Errorf("Retry-After %q on a %d", r.retryAfter, r.status)
			}
		})
	}
	// The server survived the panic.
	if r := f.do(t, "GET", "/healthz"); r.status != 200 {
		t.Fatalf("after panic: /healthz %d", r.status)
	}
}

func TestDecodeAboveLayoutMax(t *testing.T) {
	l := snowflake.JS53Layout()
	f := newFixture(t, l, nil).serve(t)
	tests := []struct {
		id         int64
		wantStatus int
	}{
		{l.MaxID(), 200},
		{l.MaxID() + 1, 400},
		{1 << 62, 400},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatInt(tt.id, 10), func(t *testing.T) {
			r := f.do(t, "GET", "/decode/"+strconv.FormatInt(tt.id, 10))
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d (%s)", r.status, tt.wantStatus, r.body)
			}
			if tt.wantStatus == 400 {
				if e := decodeError(t, r); e.Code != "invalid_id" || !strings.Contains(e.Message, "largest ID") {
					t.Fatalf("error %+v", e)
				}
			}
		})
	}
}

func TestOutOfService(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter time.Duration
		wantRA     string
		setup      func(f *fixture) // puts the guard out of service
		wantState  string
		wantReason string
		wantDetail string
	}{
		{"ntp offset", 0, "1", func(f *fixture) { f.check.Fail("offset 2s, max 500ms") }, "out_of_service", "ntp_offset", "offset 2s, max 500ms"},
		{"retry after rounds up", 2500 * time.Millisecond, "3", func(f *fixture) { f.check.Fail("x") }, "out_of_service", "ntp_offset", "x"},
		{"starting", 0, "1", func(f *fixture) { f.guard.Check(health.ReasonLeaseLost) }, "starting", "starting", "waiting for lease_lost"},
		{"stopping", 0, "1", func(f *fixture) { f.guard.Stop() }, "stopping", "stopping", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var idErrors int
			f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
				c.RetryAfter = tt.retryAfter
				c.OnIDError = func(error) { idErrors++ }
			}).serve(t)
			tt.setup(f)
			for _, uri := range []string{"/id", "/id?format=json", "/ids?count=3", "/ids?count=3&format=json", "/api/snowflake/get/k"} {
				r := f.do(t, "GET", uri)
				if r.status != 503 || r.retryAfter != tt.wantRA {
					t.Fatalf("%s: status %d Retry-After %q, want 503 %q (%s)", uri, r.status, r.retryAfter, tt.wantRA, r.body)
				}
				e := decodeError(t, r)
				if e.Code != "out_of_service" || e.Reason == nil || *e.Reason != tt.wantReason || e.State == nil || *e.State != tt.wantState {
					t.Fatalf("%s: body %s, want out_of_service, reason %q, state %q", uri, r.body, tt.wantReason, tt.wantState)
				}
				if !strings.Contains(e.Message, tt.wantDetail) {
					t.Fatalf("%s: message %q lacks the detail %q", uri, e.Message, tt.wantDetail)
				}
			}
			// Bad input is still a 400, not a 503.
			if r := f.do(t, "GET", "/ids?count=0"); r.status != 400 {
				t.Fatalf("bad count while out of service: %d", r.status)
			}
			r := f.do(t, "GET", "/readyz")
			if r.status != 503 || r.retryAfter != tt.wantRA || r.contentType != "application/json" {
				t.Fatalf("/readyz: %d %q %q", r.status, r.retryAfter, r.contentType)
			}
			var rb map[string]string
			if err := json.Unmarshal(r.body, &rb); err != nil {
				t.Fatalf("/readyz body %s: %v", r.body, err)
			}
			if rb["state"] != tt.wantState || rb["reason"] != tt.wantReason || rb["detail"] != tt.wantDetail || len(rb) != 3 {
				t.Fatalf("/readyz body %s", r.body)
			}
			if r := f.do(t, "GET", "/healthz"); r.status != 200 {
				t.Fatalf("/healthz %d while out of service", r.status)
			}
			if r := f.do(t, "GET", "/time"); r.status != 200 {
				t.Fatalf("/time %d while out of service", r.status)
			}
			if idErrors != 0 {
				t.Fatalf("OnIDError called %d times for a guard refusal", idErrors)
			}
		})
	}
}

func TestGeneratorErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		code string
	}{
		{"rollback", &snowflake.RollbackError{Behind: 2 * time.Second, Tolerance: 5 * time.Millisecond}, "clock_rollback"},
		{"rollback sentinel wrapped", fmt.Errorf("next: %w", snowflake.ErrClockRollback), "clock_rollback"},
		{"fence", snowflake.ErrFenceReached, "fence_reached"},
		{"borrow exhausted", fmt.Errorf("%w: the IDs are 3s ahead of the clock", snowflake.ErrBorrowExhausted), "borrow_exhausted"},
		{"overflow", fmt.Errorf("%w: tick past end", snowflake.ErrTimeOverflow), "time_overflow"},
		{"stalled", snowflake.ErrClockStalled, "clock_error"},
		{"before epoch", snowflake.ErrBeforeEpoch, "clock_error"},
		{"other", errTest, "id_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []error
			ids := &fakeIDs{layout: snowflake.DefaultLayout(), err: tt.err}
			var f *fixture
			f = newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
				c.IDs = ids
				// Like the real wiring: a refusal takes the node out of service.
				c.OnIDError = func(err error) { seen = append(seen, err); f.check.Fail(err.Error()) }
			}).serve(t)
			uris := []string{"/id", "/ids?count=4&format=json", "/api/snowflake/get/k"}
			for i, uri := range uris {
				f.check.Pass() // back in service, so the generator is asked
				r := f.do(t, "GET", uri)
				if r.status != 503 || r.retryAfter != "1" {
					t.Fatalf("%s: status %d, Retry-After %q (%s)", uri, r.status, r.retryAfter, r.body)
				}
				e := decodeError(t, r)
				if e.Code != tt.code || e.Reason == nil || *e.Reason != tt.code || e.State == nil || *e.State != "out_of_service" {
					t.Fatalf("%s: body %s, want code and reason %q, state out_of_service", uri, r.body, tt.code)
				}
				if !strings.Contains(e.Message, tt.err.Error()) {
					t.Fatalf("%s: message %q lacks %q", uri, e.Message, tt.err)
				}
				if len(seen) != i+1 || !errors.Is(seen[i], tt.err) {
					t.Fatalf("%s: OnIDError calls %v, want one per failing request", uri, seen)
				}
			}
			if got := ids.calls.Load(); got != int64(len(uris)) {
				t.Fatalf("generator asked %d times, want %d", got, len(uris))
			}
			// Out of service now: the generator is not asked again.
			if r := f.do(t, "GET", "/id"); r.status != 503 || decodeError(t, r).Code != "out_of_service" {
				t.Fatalf("after the failure: %d %s", r.status, r.body)
			}
			if got := ids.calls.Load(); got != int64(len(uris)) || len(seen) != len(uris) {
				t.Fatalf("out of service but generator asked (%d) or OnIDError called (%d)", got, len(seen))
			}
		})
	}
}

func TestRealGeneratorFenceAndRollback(t *testing.T) {
	t.Run("fence reached", func(t *testing.T) {
		var calls int
		f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) { c.OnIDError = func(error) { calls++ } }).serve(t)
		f.gen.SetFence(snowflake.UnixMilliOf(time.Now().Add(-time.Hour)))
		r := f.do(t, "GET", "/id")
		if e := decodeError(t, r); r.status != 503 || e.Code != "fence_reached" || *e.Reason != "fence_reached" || calls != 1 {
			t.Fatalf("status %d body %s calls %d", r.status, r.body, calls)
		}
	})
	t.Run("rollback with a rollback check", func(t *testing.T) {
		clk := clocktest.NewFake(time.Now())
		clk.SetAutoStep(time.Microsecond)
		gen, err := snowflake.NewGenerator(snowflake.Config{Layout: snowflake.DefaultLayout(), WorkerID: testWorker, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		guard := health.New(zerolog.Nop(), nil)
		rb := clockguard.NewRollback(guard, gen, 0)
		var calls int
		s, err := New(Config{IDs: gen, Guard: guard, Clock: clk, OnIDError: func(err error) {
			calls++
			var re *snowflake.RollbackError
			if errors.As(err, &re) {
				rb.Trip(re.Behind, "generator")
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		c, _ := serveOn(t, s)
		if r := doOn(t, c, "GET", "/id"); r.status != 200 {
			t.Fatalf("first ID: %d %s", r.status, r.body)
		}
		clk.StepWall(-10 * time.Second)
		r := doOn(t, c, "GET", "/ids?count=2")
		e := decodeError(t, r)
		if r.status != 503 || e.Code != "clock_rollback" || *e.Reason != "clock_rollback" || *e.State != "out_of_service" || calls != 1 {
			t.Fatalf("after rollback: %d %s, OnIDError calls %d", r.status, r.body, calls)
		}
		r = doOn(t, c, "GET", "/readyz")
		if r.status != 503 || !strings.Contains(string(r.body), `"reason":"clock_rollback"`) {
			t.Fatalf("/readyz after rollback: %d %s", r.status, r.body)
		}
	})
}

func TestObserver(t *testing.T) {
	obs := &recordingObserver{}
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.Observer = obs
		c.Routes = map[string]fasthttp.RequestHandler{"/panic": func(*fasthttp.RequestCtx) { panic("boom") }}
	}).serve(t)
	reqs := []struct{ method, uri, want string }{
		{"GET", "/id", "id 200"},
		{"GET", "/ids?count=5", "ids 200"},
		{"GET", "/ids?count=0", "ids 400"},
		{"GET", "/decode/1", "decode 200"},
		{"GET", "/api/snowflake/get/k", "leaf 200"},
		{"GET", "/healthz", "healthz 200"},
		{"GET", "/readyz", "readyz 200"},
		{"GET", "/time", "time 200"},
		{"GET", "/clock", "clock 200"},
		{"GET", "/decode", "decode 400"},
		{"GET", "/readyz/segment", "readyz 404"},
		{"GET", "/segment/orders", "segment 404"},
		{"POST", "/api/segment/get", "segment 405"},
		{"GET", "/nope", "other 404"},
		{"GET", "/panic", "other 500"},
		{"POST", "/id", "id 405"},
	}
	var want []string
	for _, r := range reqs {
		f.do(t, r.method, r.uri)
		want = append(want, r.want)
	}
	got, issued := obs.snapshot()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("observed %v, want %v", got, want)
	}
	if issued != 1+5+1 {
		t.Fatalf("issued %d, want 7", issued)
	}
}

func TestNewRejects(t *testing.T) {
	gen, err := snowflake.NewGenerator(snowflake.Config{Layout: snowflake.DefaultLayout(), Clock: clock.NewSystem()})
	if err != nil {
		t.Fatal(err)
	}
	guard := health.New(zerolog.Nop(), nil)
	ok := Config{IDs: gen, Guard: guard, Clock: clock.NewSystem()}
	h := func(*fasthttp.RequestCtx) {}
	tests := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no IDs", func(c *Config) { c.IDs = nil }, "required"},
		{"no guard", func(c *Config) { c.Guard = nil }, "required"},
		{"no clock", func(c *Config) { c.Clock = nil }, "required"},
		{"negative batch", func(c *Config) { c.MaxBatch = -1 }, "max batch"},
		{"huge batch", func(c *Config) { c.MaxBatch = MaxBatchLimit + 1 }, "max batch"},
		{"negative retry", func(c *Config) { c.RetryAfter = -time.Second }, "retry-after"},
		{"negative timeout", func(c *Config) { c.IdleTimeout = -1 }, "timeout"},
		{"route shadows id", func(c *Config) { c.Routes = map[string]fasthttp.RequestHandler{"/id": h} }, "collides"},
		{"route under decode", func(c *Config) { c.Routes = map[string]fasthttp.RequestHandler{"/decode/1": h} }, "collides"},
		{"nil route", func(c *Config) { c.Routes = map[string]fasthttp.RequestHandler{"/metrics": nil} }, "no handler"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.mod(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := New(ok); err != nil {
		t.Fatalf("New(valid): %v", err)
	}
}

func TestMaxBatchConfig(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) { c.MaxBatch = 3 }).serve(t)
	if r := f.do(t, "GET", "/ids?count=3"); r.status != 200 {
		t.Fatalf("count=3: %d", r.status)
	}
	r := f.do(t, "GET", "/ids?count=4")
	if e := decodeError(t, r); r.status != 400 || !strings.Contains(e.Message, "1 to 3") {
		t.Fatalf("count=4: %d %s", r.status, r.body)
	}
}

func TestClockReportUnencodable(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.ClockInfo = func() any { return map[string]any{"ch": make(chan int)} }
	}).serve(t)
	r := f.do(t, "GET", "/clock")
	if e := decodeError(t, r); r.status != 500 || e.Code != "internal" {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestMalformedRequestIsJSON(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil).serve(t)
	conn, err := f.ln.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write([]byte("GARBAGE\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(conn)); err != nil {
		t.Fatalf("read response: %v", err)
	}
	r := response{status: resp.StatusCode(), contentType: string(resp.Header.ContentType()), body: resp.Body()}
	if e := decodeError(t, r); r.status != 400 || e.Code != "bad_request" {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestShutdownFinishesInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var handlerDone atomic.Bool
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.Routes = map[string]fasthttp.RequestHandler{"/slow": func(ctx *fasthttp.RequestCtx) {
			close(entered)
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
			ctx.SetBodyString("done")
			handlerDone.Store(true)
		}}
	})
	ln := fasthttputil.NewInmemoryListener()
	t.Cleanup(func() { _ = ln.Close() })
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ln) }()
	client := &fasthttp.Client{Dial: func(string) (net.Conn, error) { return ln.Dial() }}

	got := make(chan response, 1)
	go func() {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("http://snowflaked.test/slow")
		if err := client.DoTimeout(req, resp, 10*time.Second); err != nil {
			got <- response{status: -1, body: []byte(err.Error())}
			return
		}
		got <- response{status: resp.StatusCode(), body: append([]byte(nil), resp.Body()...)}
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("request never reached the handler")
	}

	type result struct {
		err         error
		handlerDone bool
	}
	shut := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := f.srv.Shutdown(ctx)
		shut <- result{err, handlerDone.Load()}
	}()
	// Shutdown has begun once the listener refuses new connections.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := ln.Dial()
		if err != nil {
			break
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatal("listener still accepts connections 5s after Shutdown")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	select {
	case r := <-got:
		if r.status != 200 || string(r.body) != "done" {
			t.Fatalf("in-flight request: %d %s", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight request did not finish")
	}
	select {
	case r := <-shut:
		if r.err != nil || !r.handlerDone {
			t.Fatalf("Shutdown returned %v before the in-flight request finished (done=%v)", r.err, r.handlerDone)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func TestPanicIsLogged(t *testing.T) {
	var logs testsupport.SyncBuffer
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) {
		c.Log = zerolog.New(&logs)
		c.Routes = map[string]fasthttp.RequestHandler{"/panic": func(ctx *fasthttp.RequestCtx) {
			ctx.SetBodyString("half-written")
			panic("boom")
		}}
	}).serve(t)
	r := f.do(t, "GET", "/panic")
	if e := decodeError(t, r); r.status != 500 || e.Code != "internal" || strings.Contains(string(r.body), "half-written") {
		t.Fatalf("%d %s", r.status, r.body)
	}
	out := logs.String()
	for _, want := range []string{`"level":"error"`, `"panic":"boom"`, `"path":"/panic"`, `"stack":`} {
		if !strings.Contains(out, want) {
			t.Errorf("panic log %q lacks %s", out, want)
		}
	}
}

// TestLoopbackTCP serves over real TCP on 127.0.0.1 and checks the
// server-wide headers.
func TestLoopbackTCP(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return")
		}
	})
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + ln.Addr().String() + "/id")
	if err := (&fasthttp.Client{}).DoTimeout(req, resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode() != 200 || string(resp.Header.Peek("Server")) != "snowflaked" || len(resp.Header.Peek("Date")) == 0 {
		t.Fatalf("status %d, Server %q, Date %q", resp.StatusCode(), resp.Header.Peek("Server"), resp.Header.Peek("Date"))
	}
	parseIDText(t, string(resp.Body()))
}

// A connection that never sent a byte (a client's spare connection) does
// not hold Shutdown: fasthttp alone waits for its first request up to the
// read timeout, past the shutdown deadline.
func TestShutdownClosesUnusedConnections(t *testing.T) {
	f := newFixture(t, snowflake.DefaultLayout(), func(c *Config) { c.ReadTimeout = time.Minute })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ln) }()
	used, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer used.Close()
	if _, err := used.Write([]byte("GET /id HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	if n, err := used.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
		t.Fatalf("GET /id on a raw connection: %q %v", buf[:n], err)
	}
	spare, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	time.Sleep(50 * time.Millisecond) // let the server accept it
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a spare connection open: %v (it waited for the read timeout)", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	_ = spare.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := spare.Read(buf); err == nil {
		t.Fatalf("the spare connection is still open (read %q)", buf[:n])
	}
}

// TestShutdownOfAnIdleServerTakesNoTime: Shutdown closes the listener and
// waits for Serve before fasthttp's drain, which counts a Serve still in
// accept as an open connection and polls every 100 ms while one is open;
// with no request in flight the stop takes no (virtual) time.
func TestShutdownOfAnIdleServerTakesNoTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, snowflake.DefaultLayout(), nil)
		ln := fasthttputil.NewInmemoryListener()
		done := make(chan error, 1)
		go func() { done <- f.srv.Serve(ln) }()
		synctest.Wait()
		start := time.Now()
		if err := f.srv.Shutdown(context.Background()); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("the shutdown of an idle server took %v, want no time", d)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		time.Sleep(time.Minute) // fasthttp's idle-worker cleaner notices the stop (it sleeps 10 s)
	})
}
