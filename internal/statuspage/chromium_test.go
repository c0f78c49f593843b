package statuspage

import (
	"bytes"
	"image"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/chromium"
)

// TestIntegration_StatusPageChromium serves the page from a real fasthttp
// server on 127.0.0.1, with three fake nodes answering GET /clock over
// HTTP, loads it in headless Chromium, checks the rendered table in the DOM
// and saves a screenshot.
func TestIntegration_StatusPageChromium(t *testing.T) {
	bin := chromium.Need(t)

	const hostileKey = `<script>document.title="pwned"</script>`
	inSync := fakeNode(t, clockAnswer{workerID: 2, ntp: true, ntpOffset: 4 * time.Millisecond, state: health.InService})
	skewed := fakeNode(t, clockAnswer{workerID: 3, skew: 3 * time.Second, ntp: true, ntpOffset: -2 * time.Second,
		state: health.OutOfService, reason: health.ReasonNTPOffset, detail: "ntp offset -2s beyond 500ms"})
	hostile := fakeNode(t, clockAnswer{workerID: 4, ntp: true, ntpOffset: -time.Millisecond, state: health.InService})

	const longKey = "snowflaked-production-eu-west-1-rack-17-host-0042.example.internal:8081"
	nowMs := time.Now().UnixMilli()
	self := selfFixture()
	selfMeasured := func() nodestate.Snapshot {
		return withPeerRound(selfFixture(), peerAt(2, inSync, 0), peerAt(3, skewed, 3*time.Second), peerAt(4, hostile, 0))
	}
	src := &fakeSource{selfFn: selfMeasured, workers: []coordinator.WorkerInfo{
		{WorkerID: 1, NodeKey: "node-1", Addr: self.Addr, LeaseHeld: true, InService: true, LastReportAgeMs: 1200},
		{WorkerID: 2, NodeKey: "node-2", Addr: inSync, LeaseHeld: true, InService: true, LastReportAgeMs: 900},
		{WorkerID: 3, NodeKey: "node-3", Addr: skewed, LeaseHeld: true, LastReportAgeMs: 1500},
		{WorkerID: 4, NodeKey: hostileKey, Addr: hostile, LeaseHeld: true, InService: true, LastReportAgeMs: 700},
		{WorkerID: 5, NodeKey: "node-5", Addr: testsupport.ClosedAddr(t), LastReportAgeMs: 26 * 3600 * 1000},
		{WorkerID: 6, NodeKey: "node-6-frozen", Addr: frozenAddr(t), LastReport: snowflake.UnixMilli(nowMs - 16_700), LastReportAgeMs: 16_700, Fence: snowflake.UnixMilli(nowMs - 13_700)},
		{WorkerID: 7, NodeKey: longKey, Addr: testsupport.ClosedAddr(t), LastReport: snowflake.UnixMilli(nowMs - 30_000), LastReportAgeMs: 30_000, Fence: snowflake.UnixMilli(nowMs - 30_001), Stopped: true},
	}}
	page := newPage(t, src, nil)
	status := page.Handler()
	addr := serveHandler(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/status" {
			status(ctx)
			return
		}
		ctx.Error("not found", fasthttp.StatusNotFound)
	})
	url := "http://" + addr + "/status"

	// 1. The DOM as Chromium rendered it.
	out := chromium.Run(t, bin, url, "--dump-dom")
	d := parseDOM(t, string(out))
	if n := len(d.elements("script")); n != 0 {
		t.Fatalf("%d script elements in the rendered DOM: the hostile node key became markup", n)
	}
	if titles := d.elements("title"); len(titles) != 1 || !strings.HasPrefix(textOf(titles[0]), "snowflaked status: node-1") {
		t.Errorf("document title %v, want \"snowflaked status: node-1\"", titles)
	}
	if len(d.rows) != 7 {
		t.Fatalf("%d rows in the rendered table, want 7:\n%s", len(d.rows), out)
	}
	checkStatusPageRows(t, d, hostileKey, longKey)
	for id, want := range map[string]string{"self-cluster": "metrics-test", "self-version": "v1.2.3", "self-layout": "41/10/12"} {
		if got := textOf(d.byID(id)); !strings.Contains(got, want) {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
	if h2 := d.elements("h2"); len(h2) != 1 || textOf(h2[0]) != "Cluster: 7 nodes, 3 in service, 2 with figures over the limits" {
		t.Errorf("summary %q", textOf(h2[0]))
	}

	// 2. A screenshot.
	checkStatusPageScreenshot(t, bin, url)

	// 3. A narrow window: the long key wraps between its parts.
	narrow, _ := chromium.Screenshot(t, bin, url, 700, 1400)
	chromium.Keep(t, narrow, "status-narrow.png")

	// 4. Reloading every 5s, as the page's own link asks.
	d = parseDOM(t, string(chromium.Run(t, bin, url+"?refresh=5", "--dump-dom")))
	if m := d.metaRefresh(); m != "5" {
		t.Errorf("meta refresh %q after ?refresh=5, want 5", m)
	}
}

// checkStatusPageRows checks each row of the rendered table of
// TestIntegration_StatusPageChromium (the node keys hostileKey and longKey
// among them): its state, the cells over the limits and their markers, its
// classes, and the details of node-3 and the frozen node-6.
func checkStatusPageRows(t *testing.T, d *dom, hostileKey, longKey string) {
	t.Helper()
	tests := []struct {
		key       string
		state     string
		inService string
		over      []string
		self      bool
		down      bool
	}{
		{key: "node-1", state: "in_service", inService: "yes", self: true},
		{key: "node-2", state: "in_service", inService: "yes"},
		{key: "node-3", state: "out_of_service (ntp_offset)", inService: "no", over: []string{"ntp", "peer"}},
		{key: hostileKey, state: "in_service", inService: "yes"},
		{key: "node-5", state: "gone", inService: "no", down: true},
		{key: "node-6-frozen", state: "unreachable", inService: "no", over: []string{"report"}},
		{key: longKey, state: "stopped", inService: "no", down: true},
	}
	for _, tc := range tests {
		r := d.row(t, tc.key)
		if !strings.HasPrefix(r.cells["state"], tc.state) || r.cells["service"] != tc.inService {
			t.Errorf("%s: state %q, in service %q; want %q, %q", tc.key, r.cells["state"], r.cells["service"], tc.state, tc.inService)
		}
		for _, role := range []string{"ntp", "peer", "report"} {
			want := strings.Contains(strings.Join(tc.over, ","), role)
			if r.over[role] != want || (r.markers[role] == 1) != want {
				t.Errorf("%s: cell %s (%q) over=%v markers=%d, want over=%v", tc.key, role, r.cells[role], r.over[role], r.markers[role], want)
			}
		}
		if r.hasClass("self") != tc.self || r.hasClass("down") != tc.down || r.hasClass("flagged") != (len(tc.over) > 0) {
			t.Errorf("%s: row classes %v", tc.key, r.classes)
		}
	}
	if got := d.row(t, "node-3").cells["state"]; !strings.Contains(got, "ntp offset -2s beyond 500ms") {
		t.Errorf("node-3 state %q does not show its detail", got)
	}
	if off, err := parseOffset(d.row(t, "node-3").cells["peer"]); err != nil || abs(off-3*time.Second) > 500*time.Millisecond {
		t.Errorf("node-3 clock − this node = %v (%v), want about +3s", off, err)
	}
	if note := d.row(t, "node-6-frozen").cells["note"]; !strings.Contains(note, "report overdue") || !strings.Contains(note, "does not answer") {
		t.Errorf("the frozen node's notes %q do not say why it is flagged", note)
	}
}

// checkStatusPageScreenshot takes a 1200x800 screenshot of the page at
// url with Chromium bin and checks that it is a PNG of that size with many
// colours and the over-limit markers' red visible, and keeps it.
func checkStatusPageScreenshot(t *testing.T, bin, url string) {
	t.Helper()
	data, shot := chromium.Screenshot(t, bin, url, 1200, 800)
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", shot, err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 800 {
		t.Errorf("screenshot is %dx%d, want 1200x800", b.Dx(), b.Dy())
	}
	colours, marker := inspect(img)
	if colours < 50 {
		t.Errorf("screenshot has %d colours: a blank or broken page", colours)
	}
	if marker < 100 {
		t.Errorf("screenshot has %d pixels of the marker red: the over-limit markers are not visible", marker)
	}
	t.Logf("screenshot: %s (%d bytes, %d colours, %d marker-red pixels)", shot, len(data), colours, marker)
	chromium.Keep(t, data, "status.png")
}

// A standalone node: its own card (with a clock set back since it entered
// service: no negative age), no cluster table.
func TestIntegration_StatusPageChromiumStandalone(t *testing.T) {
	bin := chromium.Need(t)
	self := selfFixture()
	self.Mode, self.ZK, self.Cluster = nodestate.ModeStandalone, nil, ""
	self.Since = time.Now().Add(51250 * time.Millisecond)
	page := newPage(t, SourceFuncs{SelfFunc: func() nodestate.Snapshot { return self }}, nil)
	status := page.Handler()
	url := "http://" + serveHandler(t, func(ctx *fasthttp.RequestCtx) { status(ctx) }) + "/status"
	out := string(chromium.Run(t, bin, url, "--dump-dom"))
	d := parseDOM(t, out)
	if d.byID("nodes") != nil || len(d.elements("h2")) != 0 || len(d.rows) != 0 {
		t.Errorf("a standalone page has a cluster table:\n%s", out)
	}
	if negativeAge.MatchString(out) || strings.Contains(out, "−51") || !strings.Contains(out, "in the future by this node") {
		t.Errorf("the state's age is not said as a clock set back:\n%s", out)
	}
	if got := textOf(d.byID("self-mode")); got != nodestate.ModeStandalone {
		t.Errorf("mode %q", got)
	}
	data, _ := chromium.Screenshot(t, bin, url, 1000, 600)
	chromium.Keep(t, data, "status-standalone.png")
}

// inspect counts an image's distinct colours (up to 10000) and its pixels
// close to the marker's red (#cf222e).
func inspect(img image.Image) (colours, markerRed int) {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r8, g8, b8 := r>>8, g>>8, bl>>8
			if len(seen) < 10000 {
				seen[r8<<16|g8<<8|b8] = true
			}
			if near(r8, 0xcf) && near(g8, 0x22) && near(b8, 0x2e) {
				markerRed++
			}
		}
	}
	return len(seen), markerRed
}

func near(v, want uint32) bool { return v+12 >= want && v <= want+12 }
