//go:build chaos

package node

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
)

func TestChaosClockHandler(t *testing.T) {
	base := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
	hooks, err := chaosSetup(base)
	c, routes := hooks.clock, hooks.routes
	if err != nil {
		t.Fatal(err)
	}
	h := routes[chaosClockPath]
	if h == nil {
		t.Fatalf("no %s route", chaosClockPath)
	}
	tests := []struct {
		method, query string
		status        int
		code          string        // error code, "" for success
		wantOffset    time.Duration // offset after the request
	}{
		{"POST", "offset=-5s", 200, "", -5 * time.Second},
		{"GET", "offset=1s", 405, "method_not_allowed", -5 * time.Second},
		{"POST", "", 400, "invalid_offset", -5 * time.Second},
		{"POST", "offset=soon", 400, "invalid_offset", -5 * time.Second},
		{"POST", "offset=1500ms", 200, "", 1500 * time.Millisecond},
		{"POST", "offset=0", 200, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.query, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod(tc.method)
			ctx.Request.SetRequestURI(chaosClockPath + "?" + tc.query)
			h(&ctx)
			if got := ctx.Response.StatusCode(); got != tc.status {
				t.Fatalf("status %d, want %d: %s", got, tc.status, ctx.Response.Body())
			}
			var body struct {
				Offset   string `json:"offset"`
				OffsetNs int64  `json:"offset_ns"`
				Error    struct {
					Code string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
				t.Fatalf("body %q: %v", ctx.Response.Body(), err)
			}
			if body.Error.Code != tc.code {
				t.Errorf("error code %q, want %q", body.Error.Code, tc.code)
			}
			if tc.code == "" && time.Duration(body.OffsetNs) != tc.wantOffset {
				t.Errorf("reported offset %d, want %s", body.OffsetNs, tc.wantOffset)
			}
			if got := time.Duration(c.WallNanos() - base.WallNanos()); got != tc.wantOffset {
				t.Errorf("wall offset %s, want %s", got, tc.wantOffset)
			}
			if c.Mono() != base.Mono() {
				t.Errorf("monotonic clock moved: %s vs %s", c.Mono(), base.Mono())
			}
		})
	}
}

func TestChaosClockOffsetAtStart(t *testing.T) {
	tests := []struct {
		value string
		want  time.Duration
		err   bool
	}{
		{"-5s", -5 * time.Second, false},
		{"250ms", 250 * time.Millisecond, false},
		{"0", 0, false},
		{"", 0, true},
		{"yesterday", 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv(ChaosClockOffsetEnv, tc.value)
			base := clocktest.NewFake(time.UnixMilli(1_750_000_000_000))
			hooks, err := chaosSetup(base)
			c := hooks.clock
			if tc.err {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), ChaosClockOffsetEnv) {
					t.Fatalf("error %v, want ErrInvalidConfig naming %s", err, ChaosClockOffsetEnv)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(c.WallNanos() - base.WallNanos()); got != tc.want {
				t.Errorf("offset %s, want %s", got, tc.want)
			}
		})
	}
}

func TestChaosDiskHang(t *testing.T) {
	hooks, err := chaosSetup(clocktest.NewFake(time.UnixMilli(1_750_000_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	h := hooks.routes[chaosDiskPath]
	if h == nil || hooks.disk == nil {
		t.Fatalf("no %s route or disk decorator", chaosDiskPath)
	}
	mem := disk.NewMem()
	d := hooks.disk(mem.Process())
	write := func() {
		if err := d.WriteFileAtomic("f", []byte("x"), 0o600); err != nil {
			t.Error(err)
		}
	}
	post := func(query string) int {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI(chaosDiskPath + "?" + query)
		h(&ctx)
		return ctx.Response.StatusCode()
	}
	// Not hung: a write passes at once.
	write()
	if code := post("hang=maybe"); code != 400 {
		t.Fatalf("bad hang value: %d", code)
	}
	if code := post("hang=true"); code != 200 {
		t.Fatalf("hang=true: %d", code)
	}
	passed := make(chan struct{})
	go func() { write(); close(passed) }()
	select {
	case <-passed:
		t.Fatal("a write passed while the disk hangs")
	case <-time.After(50 * time.Millisecond):
	}
	if code := post("hang=false"); code != 200 {
		t.Fatalf("hang=false: %d", code)
	}
	select {
	case <-passed:
	case <-time.After(5 * time.Second):
		t.Fatal("the hung write was not released")
	}
	if b, ok := mem.File("f"); !ok || string(b) != "x" {
		t.Fatalf("the released write did not reach the disk: %q %v", b, ok)
	}
}
