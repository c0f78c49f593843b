package server

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

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

// The start phase's server refuses as the node's server does: Authorize is
// asked first, on every path and method, and its error answers 403
// client_not_allowed through the same code; the detail of what the node
// waits for goes only to the clients Admin accepts, the others get the
// state and reason alone.
func TestStartingAuthorizesAndShowsTheDetailToAdmins(t *testing.T) {
	const detail = "waiting for the lease on worker ID 3, held by session 0x1 at 10.0.0.7:8080, to go"
	// The client's name comes in a header here; the node takes it from the
	// client certificate.
	authorize := func(ctx *fasthttp.RequestCtx) error {
		if c := string(ctx.Request.Header.Peek("X-Client")); c != "app" && c != "ops" {
			return errors.New("client certificate " + strconv.Quote(c) + " is not allowed on " + string(ctx.Path()))
		}
		return nil
	}
	admin := func(ctx *fasthttp.RequestCtx) bool { return string(ctx.Request.Header.Peek("X-Client")) == "ops" }
	s, err := NewStarting(StartingConfig{Status: func() health.Status {
		return health.Status{State: health.Starting, Reason: health.ReasonStarting, Detail: detail}
	}, Authorize: authorize, Admin: admin, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := serveOn(t, s)
	tests := []struct {
		client, method, uri string
		want                int
		code                string // of an error body; "" for /healthz and /readyz
		detail              bool
	}{
		{"stranger", "GET", "/healthz", 403, "client_not_allowed", false},
		{"stranger", "GET", "/readyz", 403, "client_not_allowed", false},
		{"stranger", "GET", "/id", 403, "client_not_allowed", false},
		{"stranger", "GET", "/no-such-path", 403, "client_not_allowed", false},
		{"stranger", "POST", "/id", 403, "client_not_allowed", false},
		{"app", "GET", "/healthz", 200, "", false},
		{"app", "GET", "/readyz", 503, "", false},
		{"app", "GET", "/readyz/segment", 503, "", false},
		{"app", "GET", "/id", 503, "out_of_service", false},
		{"app", "POST", "/id", 405, "method_not_allowed", false},
		{"ops", "GET", "/readyz", 503, "", true},
		{"ops", "GET", "/id", 503, "out_of_service", true},
		{"ops", "GET", "/status", 503, "out_of_service", true},
	}
	for _, tc := range tests {
		t.Run(tc.client+" "+tc.method+" "+tc.uri, func(t *testing.T) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://snowflaked.test" + tc.uri)
			req.Header.SetMethod(tc.method)
			req.Header.Set("X-Client", tc.client)
			if err := c.DoTimeout(req, resp, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			r := response{status: resp.StatusCode(), contentType: string(resp.Header.ContentType()),
				retryAfter: string(resp.Header.Peek("Retry-After")), body: append([]byte(nil), resp.Body()...)}
			if r.status != tc.want {
				t.Fatalf("%d %s, want %d", r.status, r.body, tc.want)
			}
			if got := strings.Contains(string(r.body), detail); got != tc.detail {
				t.Errorf("body %s, want the detail: %v", r.body, tc.detail)
			}
			switch {
			case tc.code != "":
				e := decodeError(t, r)
				if e.Code != tc.code {
					t.Errorf("code %q, want %q", e.Code, tc.code)
				}
				if tc.code == codeClientNotAllowed && (e.Message != `client certificate "`+tc.client+`" is not allowed on `+tc.uri || r.retryAfter != "") {
					t.Errorf("error %+v (Retry-After %q), want Authorize's error as message, no Retry-After", e, r.retryAfter)
				}
				if tc.code == codeOutOfService && (*e.State != "starting" || *e.Reason != "starting") {
					t.Errorf("error %+v, want state and reason starting", e)
				}
			case tc.want == 503:
				var b readyBody
				if err := json.Unmarshal(r.body, &b); err != nil || b.State != "starting" || b.Reason != "starting" || (b.Detail == detail) != tc.detail {
					t.Errorf("body %s (%v), want state and reason starting, the detail: %v", r.body, err, tc.detail)
				}
			}
		})
	}
}
