package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// While the node starts, before its server exists, the port answers:
// /healthz 200, /readyz 503 starting with what the node waits for, every
// other path 503 out_of_service with the same state, reason and detail,
// and each response closes its connection.
func TestStartingAnswersWhileTheNodeStarts(t *testing.T) {
	const detail = "waiting for the lease on worker ID 3, held by session 0x1, to go; up to 4s more"
	s, err := NewStarting(StartingConfig{Status: func() health.Status {
		return health.Status{State: health.Starting, Reason: health.ReasonStarting, Detail: detail}
	}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := serveOn(t, s)

	tests := []struct {
		method, uri string
		want        int
		code        string // of an error body; "" for /healthz and /readyz
	}{
		{"GET", "/healthz", 200, ""},
		{"HEAD", "/healthz", 200, ""},
		{"GET", "/readyz", 503, ""},
		{"GET", "/readyz/segment", 503, ""},
		{"GET", "/id", 503, "out_of_service"},
		{"GET", "/ids?count=5", 503, "out_of_service"},
		{"GET", "/api/snowflake/get/k", 503, "out_of_service"},
		{"GET", "/segment/acct", 503, "out_of_service"},
		{"GET", "/uuid", 503, "out_of_service"},
		{"GET", "/clock", 503, "out_of_service"},
		{"GET", "/metrics", 503, "out_of_service"},
		{"POST", "/id", 405, "method_not_allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.uri, func(t *testing.T) {
			r := doOn(t, c, tc.method, tc.uri)
			if r.status != tc.want || r.cacheControl != "no-store" {
				t.Fatalf("%d (Cache-Control %q) %s, want %d", r.status, r.cacheControl, r.body, tc.want)
			}
			if tc.want == 503 && r.retryAfter != "1" {
				t.Errorf("Retry-After %q, want 1", r.retryAfter)
			}
			switch {
			case tc.method == "HEAD":
			case tc.uri == "/healthz":
				if string(r.body) != `{"status":"ok"}` {
					t.Errorf("body %s", r.body)
				}
			case strings.HasPrefix(tc.uri, "/readyz"):
				var b readyBody
				if err := json.Unmarshal(r.body, &b); err != nil || b.State != "starting" || b.Reason != "starting" || b.Detail != detail {
					t.Errorf("body %s (%v), want state and reason starting with the detail", r.body, err)
				}
			default:
				e := decodeError(t, r)
				if e.Code != tc.code {
					t.Errorf("code %q, want %q", e.Code, tc.code)
				}
				if tc.want == 503 && (*e.State != "starting" || *e.Reason != "starting" || !strings.Contains(e.Message, detail)) {
					t.Errorf("error %+v, want state and reason starting, the detail in the message", e)
				}
			}
		})
	}

	// Every response closes its connection: none outlives the phase.
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://snowflaked.test/healthz")
	if err := c.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	if !resp.ConnectionClose() {
		t.Errorf("response without Connection: close")
	}
}

func TestNewStartingNeedsStatus(t *testing.T) {
	if _, err := NewStarting(StartingConfig{}); err == nil {
		t.Fatal("NewStarting without Status: no error")
	}
}
