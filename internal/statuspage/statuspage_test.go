package statuspage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestNew_BadConfig(t *testing.T) {
	src := &fakeSource{}
	clk := clock.NewSystem()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no source", Config{Clock: clk}},
		{"no clock", Config{Source: src}},
		{"negative fetch timeout", Config{Source: src, Clock: clk, FetchTimeout: -1}},
		{"negative list timeout", Config{Source: src, Clock: clk, ListTimeout: -1}},
		{"negative concurrency", Config{Source: src, Clock: clk, Concurrency: -1}},
		{"negative max fetch", Config{Source: src, Clock: clk, MaxFetch: -1}},
		{"negative ntp max offset", Config{Source: src, Clock: clk, NTPMaxOffset: -1}},
		{"negative peer max offset", Config{Source: src, Clock: clk, PeerMaxOffset: -1}},
		{"negative max report age", Config{Source: src, Clock: clk, MaxReportAge: -1}},
		{"negative refresh", Config{Source: src, Clock: clk, Refresh: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg)
			if !errors.Is(err, errBadConfig) || p != nil {
				t.Fatalf("New = %v, %v; want nil and an error wrapping ErrBadConfig", p, err)
			}
		})
	}
}

// TestTemplate_EscapesHostileValues: values from ZooKeeper and peers are
// text, never markup, in element text and in attributes alike.
func TestTemplate_EscapesHostileValues(t *testing.T) {
	hostile := []string{
		`<script>alert("key")</script>`,
		`"><img src=x onerror=alert(1)>`,
		`</td></tr></table><script>alert(2)</script>`,
		`javascript:alert(3)`,
	}
	for i, h := range hostile {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			v := view{
				Title: "snowflaked status: " + h,
				Self:  selfView{NodeKey: h, Addr: h, Mode: h, State: "in_service", StateClass: "ok", Reason: h, Detail: h, Fence: h, NTP: cell{Text: h, Title: h}, ZK: h},
				Rows: []row{{Self: true, Running: true, WorkerID: "1", NodeKey: h, Addr: h, State: h, Reason: h, Detail: h,
					NTP: cell{Text: h, Title: h, Over: true}, Peer: cell{Text: h, Title: h}, Report: cell{Text: h}, Note: h}},
				ListError: h, NTPMax: h, PeerMax: h, ReportMax: h,
			}
			var buf bytes.Buffer
			if err := pageTemplate.Execute(&buf, v); err != nil {
				t.Fatal(err)
			}
			d := parseDOM(t, buf.String())
			if n := len(d.elements("script")) + len(d.elements("img")); n != 0 {
				t.Fatalf("%d script/img elements: the value was rendered as markup:\n%s", n, buf.String())
			}
			if len(d.rows) != 1 {
				t.Fatalf("%d rows, want 1: the value broke the table", len(d.rows))
			}
			r := d.rows[0]
			for _, role := range []string{"key", "addr", "note"} {
				if r.cells[role] != h {
					t.Errorf("cell %s = %q, want the value as text %q", role, r.cells[role], h)
				}
			}
			if got := textOf(d.byID("list-error")); got != h {
				t.Errorf("list error = %q, want %q", got, h)
			}
			for n := range d.root.Descendants() {
				if n.Data == "td" && strings.Contains(attr(n, "class"), "state") && attr(n, "title") != h {
					t.Errorf("state cell title = %q, want %q", attr(n, "title"), h)
				}
			}
		})
	}
}

// TestTemplate_Markers: a figure over its limit gets the "over" class and a
// visible marker; the others get neither.
func TestTemplate_Markers(t *testing.T) {
	v := view{
		Self: selfView{NodeKey: "n", State: "in_service", StateClass: "ok"},
		Rows: []row{
			{Running: true, WorkerID: "1", NodeKey: "calm", NTP: cell{Text: "+1ms"}, Peer: cell{Text: "+2ms"}, Report: cell{Text: "1s ago"}},
			{Running: true, WorkerID: "2", NodeKey: "ntp-off", NTP: cell{Text: "+2s", Over: true}, Peer: cell{Text: "+2ms"}, Report: cell{Text: "1s ago"}},
			{Running: true, WorkerID: "3", NodeKey: "all-off", NTP: cell{Text: "+2s", Over: true}, Peer: cell{Text: "-3s", Over: true}, Report: cell{Text: "1m0s ago", Over: true}},
			{Down: true, WorkerID: "4", NodeKey: "gone", Report: cell{Text: "never"}},
		},
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		t.Fatal(err)
	}
	d := parseDOM(t, buf.String())
	tests := []struct {
		key               string
		ntp, peer, report bool
		flagged, down     bool
	}{
		{"calm", false, false, false, false, false},
		{"ntp-off", true, false, false, true, false},
		{"all-off", true, true, true, true, false},
		{"gone", false, false, false, false, true},
	}
	for _, tc := range tests {
		r := d.row(t, tc.key)
		for role, want := range map[string]bool{"ntp": tc.ntp, "peer": tc.peer, "report": tc.report} {
			if r.over[role] != want || (r.markers[role] == 1) != want {
				t.Errorf("%s: cell %s over=%v markers=%d, want over=%v", tc.key, role, r.over[role], r.markers[role], want)
			}
		}
		if r.hasClass("flagged") != tc.flagged || r.hasClass("down") != tc.down {
			t.Errorf("%s: row classes %v, want flagged=%v down=%v", tc.key, r.classes, tc.flagged, tc.down)
		}
	}
}

// TestPage_Cluster: the page asks every running peer's /clock (real loopback
// servers) and shows each node's state, offsets, report age and problems.
func TestPage_Cluster(t *testing.T) {
	inSync := fakeNode(t, clockAnswer{workerID: 2, ntp: true, ntpOffset: 5 * time.Millisecond, state: health.InService})
	skewed := fakeNode(t, clockAnswer{workerID: 3, skew: 3 * time.Second, ntp: true, ntpOffset: -2 * time.Second,
		state: health.OutOfService, reason: health.ReasonNTPOffset, detail: "offset -2s"})
	wrongID := fakeNode(t, clockAnswer{workerID: 99, state: health.InService})
	failing := serveHandler(t, func(ctx *fasthttp.RequestCtx) { ctx.Error("boom", fasthttp.StatusInternalServerError) })
	garbage := serveHandler(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("{not json") })
	noNow := serveHandler(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(`{"state":"starting","reason":"starting"}`) })
	down := testsupport.ClosedAddr(t)
	frozen := frozenAddr(t)
	const longKey = "snowflaked-production-eu-west-1-rack-17-host-0042.example.internal:8081"
	nowMs := time.Now().UnixMilli()

	// The clock guard's last peer round measured three of them; the page
	// shows its offsets.
	self := withPeerRound(selfFixture(), peerAt(2, inSync, 0), peerAt(3, skewed, 3*time.Second), peerAt(8, wrongID, 0))
	src := &fakeSource{self: self, workers: []coordinator.WorkerInfo{
		{WorkerID: 1, NodeKey: "node-1", Addr: self.Addr, LeaseHeld: true, InService: true, LastReportAgeMs: 1200},
		{WorkerID: 2, NodeKey: "node-2", Addr: inSync, LeaseHeld: true, InService: true, LastReportAgeMs: 900},
		{WorkerID: 3, NodeKey: "node-3", Addr: skewed, LeaseHeld: true, LastReportAgeMs: 60_000},
		{WorkerID: 4, NodeKey: "node-4", Addr: down, LeaseHeld: true, LastReportAgeMs: 2000},
		{WorkerID: 5, NodeKey: "node-5", Addr: down, LastReportAgeMs: 48 * 3600 * 1000},
		{WorkerID: 6, NodeKey: "node-6", Addr: failing, LeaseHeld: true, InService: true, LastReportAgeMs: 100},
		{WorkerID: 7, NodeKey: "node-7", Addr: garbage, LeaseHeld: true, InService: true, LastReportAgeMs: 100},
		{WorkerID: 8, NodeKey: "node-8", Addr: wrongID, LeaseHeld: true, InService: true, LastReportAgeMs: 100},
		{WorkerID: 9, NodeKey: "node-9", Addr: noNow, LeaseHeld: true, LastReportAgeMs: 100},
		{WorkerID: 10, NodeKey: "node-10", Addr: "evil/path:80", LeaseHeld: true, LastReportAgeMs: 100},
		{WorkerID: -1, NodeKey: "node-old", Addr: down, LastReportAgeMs: -1, Problem: "worker ID taken over"},
		// Frozen (SIGSTOP) after its session expired: no lease, its last
		// write a renewal (fence ahead of it), 16.7s ago.
		{WorkerID: 11, NodeKey: "node-11", Addr: frozen, LastReport: snowflake.UnixMilli(nowMs - 16_700), LastReportAgeMs: 16_700, Fence: snowflake.UnixMilli(nowMs - 16_700 + 3000)},
		// Frozen before its session expired: it still holds its lease.
		{WorkerID: 12, NodeKey: "node-12", Addr: frozen, LeaseHeld: true, LastReport: snowflake.UnixMilli(nowMs - 5000), LastReportAgeMs: 5000, Fence: snowflake.UnixMilli(nowMs - 2000)},
		// Stopped cleanly 30s ago: its last write was its final fence.
		{WorkerID: 13, NodeKey: "node-13", Addr: down, LastReport: snowflake.UnixMilli(nowMs - 30_000), LastReportAgeMs: 30_000, Fence: snowflake.UnixMilli(nowMs - 30_005), Stopped: true},
		// Killed 20s ago, nothing listens now.
		{WorkerID: 14, NodeKey: longKey, Addr: down, LastReport: snowflake.UnixMilli(nowMs - 20_000), LastReportAgeMs: 20_000, Fence: snowflake.UnixMilli(nowMs - 17_000)},
	}}
	p := newPage(t, src, nil)
	ctx := get(t, p, fasthttp.MethodGet)
	if sc := ctx.Response.StatusCode(); sc != 200 {
		t.Fatalf("status %d: %s", sc, ctx.Response.Body())
	}
	if ct := string(ctx.Response.Header.ContentType()); ct != "text/html; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	if csp := string(ctx.Response.Header.Peek("Content-Security-Policy")); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q does not forbid scripts", csp)
	}
	body := string(ctx.Response.Body())
	// A long key wraps only between its parts, never inside a label or
	// the port.
	if !strings.Contains(body, "eu-<wbr>west-<wbr>1-<wbr>") || !strings.Contains(body, "internal:<wbr>8081<wbr>") || strings.Contains(body, "break-all") {
		t.Errorf("the long key is not broken at its separators only")
	}
	d := parseDOM(t, body)
	if len(d.rows) != len(src.workers) {
		t.Fatalf("%d rows, want %d", len(d.rows), len(src.workers))
	}

	tests := []clusterRowWant{
		{key: "node-1", state: "in_service", inService: "yes", self: true},
		{key: "node-2", state: "in_service", inService: "yes", skew: 0},
		{key: "node-3", state: "out_of_service (ntp_offset)", inService: "no", over: []string{"ntp", "peer", "report"}, skew: 3 * time.Second},
		{key: "node-4", state: "unreachable", inService: "no", notes: []string{"GET /clock"}},
		{key: "node-5", state: "gone", inService: "no", down: true, notes: []string{"no report for 48h0m0s"}},
		{key: "node-6", state: "unreachable", inService: "yes", notes: []string{"status 500"}},
		{key: "node-7", state: "unreachable", inService: "yes", notes: []string{"decode"}},
		{key: "node-8", state: "in_service", inService: "yes", notes: []string{"answers as worker 99"}},
		{key: "node-9", state: "starting (starting)", inService: "no", notes: []string{"no now_ms"}},
		{key: "node-10", state: "unreachable", inService: "no", notes: []string{"bad address"}},
		{key: "node-old", state: "gone", inService: "no", down: true, notes: []string{"worker ID taken over", "never reported"}},
		{key: "node-11", state: "unreachable", inService: "no", over: []string{"report"}, notes: []string{"holds no lease and does not answer: killed without its final fence write, frozen, or cut off", "report overdue: the last one is 16.7s old, over the 10s limit"}},
		{key: "node-12", state: "unreachable", inService: "no", notes: []string{"holds its lease but does not answer"}},
		{key: "node-13", state: "stopped", inService: "no", down: true, notes: []string{"stopped cleanly"}},
		{key: longKey, state: "unreachable", inService: "no", over: []string{"report"}, notes: []string{"killed without its final fence write", "report overdue"}},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) { tc.check(t, d.row(t, tc.key)) })
	}
	// The in-sync node's NTP cell: its NTP offset is +5ms (server ahead),
	// so its clock minus NTP is -5ms.
	if got := d.row(t, "node-2").cells["ntp"]; got != "-5ms" {
		t.Errorf("node-2 clock − NTP = %q, want -5ms", got)
	}
	if got := d.row(t, "node-3").cells["ntp"]; !strings.HasPrefix(got, "+2s") {
		t.Errorf("node-3 clock − NTP = %q, want +2s", got)
	}
	// Top of the page: this node.
	if got := textOf(d.byID("self-state")); got != "in_service" {
		t.Errorf("self state %q", got)
	}
	if got := textOf(d.byID("self-worker")); got != "1" {
		t.Errorf("self worker %q", got)
	}
	if got := textOf(d.byID("self-fence")); !strings.Contains(got, fmt.Sprint(int64(self.Fence))) || !strings.Contains(got, "ahead of the clock") {
		t.Errorf("self fence %q", got)
	}
	if d.byID("list-error") != nil {
		t.Error("a list error is shown though the list worked")
	}
}

// clusterRowWant is what TestPage_Cluster wants of one node's row.
type clusterRowWant struct {
	key        string
	state      string   // prefix of the state cell
	inService  string   // yes/no
	over       []string // cells with the over class
	notes      []string // substrings of the notes
	self, down bool
	skew       time.Duration // the node's clock minus this one, for fetched nodes
}

// check checks the row r against tc.
func (tc clusterRowWant) check(t *testing.T, r domRow) {
	t.Helper()
	if !strings.HasPrefix(r.cells["state"], tc.state) {
		t.Errorf("state %q, want %q", r.cells["state"], tc.state)
	}
	if r.cells["service"] != tc.inService {
		t.Errorf("in service %q, want %q", r.cells["service"], tc.inService)
	}
	for _, role := range []string{"ntp", "peer", "report"} {
		want := false
		for _, o := range tc.over {
			want = want || o == role
		}
		if r.over[role] != want || (r.markers[role] > 0) != want {
			t.Errorf("cell %s (%q): over=%v markers=%d, want over=%v", role, r.cells[role], r.over[role], r.markers[role], want)
		}
	}
	for _, n := range tc.notes {
		if !strings.Contains(r.cells["note"], n) {
			t.Errorf("notes %q do not mention %q", r.cells["note"], n)
		}
	}
	if r.hasClass("self") != tc.self || r.hasClass("down") != tc.down {
		t.Errorf("row classes %v, want self=%v down=%v", r.classes, tc.self, tc.down)
	}
	switch tc.key {
	case "node-1":
		if r.cells["peer"] != "this node" {
			t.Errorf("clock − this node %q, want \"this node\"", r.cells["peer"])
		}
	case "node-2", "node-3", "node-8":
		// now_ms has millisecond resolution and the loopback round
		// trip is short: a second of slack cannot hide a wrong sign
		// or a missing correction of the 3s skew.
		off, err := parseOffset(r.cells["peer"])
		if err != nil || abs(off-tc.skew) > 500*time.Millisecond {
			t.Errorf("clock − this node %q (%v, %v), want about %v", r.cells["peer"], off, err, tc.skew)
		}
	default:
		if r.cells["peer"] != unknown {
			t.Errorf("clock − this node %q, want %q for a node without a reading", r.cells["peer"], unknown)
		}
	}
}

// TestPage_SelfAndList: this node is shown when the list lacks it, in
// standalone mode, and when the list fails (with a visible error).
func TestPage_SelfAndList(t *testing.T) {
	self := selfFixture()
	tests := []struct {
		name      string
		src       Source
		rows      int
		selfNote  string
		listError string
	}{
		{"no worker source", SourceFuncs{SelfFunc: func() nodestate.Snapshot { return self }}, 1, "", ""},
		{"not in the list", &fakeSource{self: self, workers: []coordinator.WorkerInfo{{WorkerID: 7, NodeKey: "other", LastReportAgeMs: -1}}}, 2, "not in the cluster's worker list", ""},
		{"list fails", &fakeSource{self: self, err: errors.New("zookeeper unavailable: no session")}, 1, "", "zookeeper unavailable: no session"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newPage(t, tc.src, nil)
			var buf bytes.Buffer
			if err := p.Render(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			d := parseDOM(t, buf.String())
			if len(d.rows) != tc.rows {
				t.Fatalf("%d rows, want %d", len(d.rows), tc.rows)
			}
			r := d.row(t, "node-1")
			if !r.hasClass("self") || !strings.Contains(r.cells["note"], tc.selfNote) || r.cells["state"] != "in_service" {
				t.Errorf("self row %+v, want class self, state in_service, note %q", r, tc.selfNote)
			}
			e := d.byID("list-error")
			switch {
			case tc.listError == "" && e != nil:
				t.Errorf("unexpected list error %q", textOf(e))
			case tc.listError != "" && (e == nil || !strings.Contains(textOf(e), tc.listError)):
				t.Errorf("list error missing or wrong, want %q", tc.listError)
			}
		})
	}
}

// TestPage_SlowPeer: a peer that does not answer costs one FetchTimeout and
// shows as unreachable.
func TestPage_SlowPeer(t *testing.T) {
	release := make(chan struct{})
	slow := serveHandler(t, func(ctx *fasthttp.RequestCtx) {
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		ctx.SetBody(clockBody(clockAnswer{workerID: 2}))
	})
	t.Cleanup(func() { close(release) }) // runs before the server's shutdown
	src := &fakeSource{self: selfFixture(), workers: []coordinator.WorkerInfo{{WorkerID: 2, NodeKey: "slow", Addr: slow, LeaseHeld: true, InService: true}}}
	p := newPage(t, src, func(c *Config) { c.FetchTimeout = 200 * time.Millisecond })
	start := time.Now()
	var buf bytes.Buffer
	if err := p.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the view took %v: the fetch is not bounded by its 200ms timeout", took)
	}
	r := parseDOM(t, buf.String()).row(t, "slow")
	if r.cells["state"] != "unreachable" || !strings.Contains(strings.ToLower(r.cells["note"]), "timeout") {
		t.Errorf("slow peer row: state %q, note %q; want unreachable with a timeout", r.cells["state"], r.cells["note"])
	}
}

// TestPage_FetchesConcurrently: four peers that each answer only once all
// four are waiting can be shown only if they are asked at once.
func TestPage_FetchesConcurrently(t *testing.T) {
	const n = 4
	var arrived atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	var workers []coordinator.WorkerInfo
	for i := range n {
		addr := serveHandler(t, func(ctx *fasthttp.RequestCtx) {
			if arrived.Add(1) == n {
				once.Do(func() { close(all) })
			}
			select {
			case <-all:
				ctx.SetBody(clockBody(clockAnswer{workerID: int64(10 + i), state: health.InService}))
			case <-time.After(3 * time.Second):
				ctx.Error("not all peers were asked at once", fasthttp.StatusServiceUnavailable)
			}
		})
		workers = append(workers, coordinator.WorkerInfo{WorkerID: int64(10 + i), NodeKey: fmt.Sprintf("peer-%d", i), Addr: addr, LeaseHeld: true, InService: true})
	}
	src := &fakeSource{self: selfFixture(), workers: workers}
	p := newPage(t, src, func(c *Config) { c.FetchTimeout = 5 * time.Second })
	var buf bytes.Buffer
	if err := p.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	d := parseDOM(t, buf.String())
	for i := range n {
		if r := d.row(t, fmt.Sprintf("peer-%d", i)); r.cells["state"] != "in_service" {
			t.Errorf("peer-%d: state %q, note %q", i, r.cells["state"], r.cells["note"])
		}
	}
}

// TestPage_Bounds: Concurrency caps the requests in flight and MaxFetch the
// peers asked per view.
func TestPage_Bounds(t *testing.T) {
	var inFlight, maxInFlight, served atomic.Int32
	handler := func(ctx *fasthttp.RequestCtx) {
		cur := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if cur <= m || maxInFlight.CompareAndSwap(m, cur) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond) // hold the slot so that overlaps can happen
		inFlight.Add(-1)
		served.Add(1)
		ctx.SetBody(clockBody(clockAnswer{workerID: 0, state: health.InService}))
	}
	var workers []coordinator.WorkerInfo
	for i := range 8 {
		workers = append(workers, coordinator.WorkerInfo{WorkerID: int64(20 + i), NodeKey: fmt.Sprintf("p%d", i), Addr: serveHandler(t, handler), LeaseHeld: true})
	}
	src := &fakeSource{self: selfFixture(), workers: workers}
	p := newPage(t, src, func(c *Config) { c.Concurrency = 2; c.MaxFetch = 6 })
	var buf bytes.Buffer
	if err := p.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	if m := maxInFlight.Load(); m > 2 {
		t.Errorf("%d requests in flight at once, want at most 2", m)
	}
	if s := served.Load(); s != 6 {
		t.Errorf("%d peers asked, want MaxFetch = 6", s)
	}
	d := parseDOM(t, buf.String())
	notAsked := 0
	for _, r := range d.rows {
		if strings.Contains(r.cells["note"], "not asked: a view asks at most 6 peers") {
			notAsked++
		}
	}
	if notAsked != 2 {
		t.Errorf("%d rows say they were not asked, want 2", notAsked)
	}
}

func TestHandler_Methods(t *testing.T) {
	p := newPage(t, SourceFuncs{SelfFunc: selfFixture}, nil)
	tests := []struct {
		method string
		status int
		body   string
	}{
		{fasthttp.MethodGet, 200, "<table id=\"nodes\">"},
		{fasthttp.MethodHead, 200, ""},
		{fasthttp.MethodPost, 405, `"method_not_allowed"`},
		{fasthttp.MethodPut, 405, `"method_not_allowed"`},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			ctx := get(t, p, tc.method)
			if sc := ctx.Response.StatusCode(); sc != tc.status {
				t.Fatalf("status %d, want %d", sc, tc.status)
			}
			if !strings.Contains(string(ctx.Response.Body()), tc.body) {
				t.Errorf("body %.300q does not contain %q", ctx.Response.Body(), tc.body)
			}
			if tc.status == 405 && string(ctx.Response.Header.Peek("Allow")) != "GET, HEAD" {
				t.Error("405 without Allow: GET, HEAD")
			}
		})
	}
}

func TestRefresh(t *testing.T) {
	for _, tc := range []struct {
		refresh time.Duration
		want    string
	}{{0, ""}, {15 * time.Second, `<meta http-equiv="refresh" content="15">`}} {
		p := newPage(t, SourceFuncs{SelfFunc: selfFixture}, func(c *Config) { c.Refresh = tc.refresh })
		body := string(get(t, p, fasthttp.MethodGet).Response.Body())
		if got := strings.Contains(body, `http-equiv="refresh"`); got != (tc.want != "") || !strings.Contains(body, tc.want) {
			t.Errorf("refresh %v: page has refresh=%v, want %q", tc.refresh, got, tc.want)
		}
	}
}

// parseOffset reads a signed offset cell, marker text removed.
func parseOffset(text string) (time.Duration, error) {
	text, _, _ = strings.Cut(text, "⚠")
	return time.ParseDuration(strings.TrimSpace(text))
}

func TestSigned(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{1234 * time.Nanosecond, "+1µs"},
		{-12345678 * time.Nanosecond, "-12.3ms"},
		{3*time.Second + 2345*time.Microsecond, "+3.002s"},
		{-90 * time.Second, "-1m30s"},
	}
	for _, tc := range tests {
		if got := signed(tc.d); got != tc.want {
			t.Errorf("signed(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// Segment mode's tags show in their own table; none served yet says so;
// standalone (nil) leaves the section out.
func TestPage_SegmentTags(t *testing.T) {
	for _, tc := range []struct {
		name     string
		segments []segment.TagStatus
		want     []string
		wantNot  []string
	}{
		{"standalone", nil, nil, []string{"Segment tags", `id="segments"`}},
		{"none yet", []segment.TagStatus{}, []string{"Segment tags served by this node: 0", `id="segments-none"`}, []string{`id="segments"`}},
		{"two tags", []segment.TagStatus{
			{Tag: "orders", Available: 958, Held: []segment.Range{{Lo: 1042, Hi: 2000}}, Issued: 42, Step: 2000, Loads: 3, Ahead: 100},
			{Tag: "<b>x</b>", Wasted: 7, Error: "load a range: zookeeper unavailable"},
		}, []string{"Segment tags served by this node: 2", `data-tag="orders"`, "[1042,2000)", "958", "&lt;b&gt;x&lt;/b&gt;", "zookeeper unavailable"}, []string{"<b>x</b>", "token required"}},
		{"a token tag", []segment.TagStatus{{Tag: "payouts", Token: true, RefusedRequired: 3, RefusedInvalid: 12}},
			[]string{"token required; refused: 3 without, 12 invalid."}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			self := selfFixture()
			self.Segments = tc.segments
			p := newPage(t, SourceFuncs{SelfFunc: func() nodestate.Snapshot { return self }}, nil)
			var buf bytes.Buffer
			if err := p.Render(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("page lacks %q", w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(buf.String(), w) {
					t.Errorf("page has %q", w)
				}
			}
		})
	}
}

// A standalone node's page is its card: no cluster table, no report age,
// and an age never negative (its state's Since after the page's now: the
// clock was set back).
func TestPage_Standalone(t *testing.T) {
	self := selfFixture()
	self.Mode, self.ZK, self.Cluster = nodestate.ModeStandalone, nil, ""
	self.Since = time.Now().Add(51 * time.Second)
	p := newPage(t, SourceFuncs{SelfFunc: func() nodestate.Snapshot { return self }}, nil)
	var buf bytes.Buffer
	if err := p.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	d := parseDOM(t, page)
	if d.byID("nodes") != nil || strings.Contains(page, "Last report") || d.byID("self-cluster") != nil {
		t.Errorf("a standalone page shows a cluster:\n%s", page)
	}
	if negativeAge.MatchString(page) || !strings.Contains(page, "in the future by this node") {
		t.Errorf("a Since after now is not said as a clock set back:\n%s", page)
	}
	for id, want := range map[string]string{"self-version": "v1.2.3", "self-layout": "41/10/12 epoch"} {
		if got := textOf(d.byID(id)); !strings.Contains(got, want) {
			t.Errorf("#%s = %q, want %q", id, got, want)
		}
	}
}

// ?refresh=N makes the page reload every N seconds; anything else is a 400
// naming the problem.
func TestPage_Refresh(t *testing.T) {
	p := newPage(t, SourceFuncs{SelfFunc: selfFixture}, nil)
	for _, tc := range []struct {
		query, meta string
		code        int
	}{
		{"", "", 200},
		{"refresh=5", "5", 200},
		{"refresh=0", "", 200},
		{"refresh=3600", "3600", 200},
		{"refresh=3601", "", 400},
		{"refresh=-1", "", 400},
		{"refresh=soon", "", 400},
		{"refresh=5&refresh=6", "", 400},
		{"reload=5", "", 400},
	} {
		ctx := &fasthttp.RequestCtx{}
		ctx.Request.Header.SetMethod(fasthttp.MethodGet)
		ctx.Request.SetRequestURI("/status?" + tc.query)
		p.Handler()(ctx)
		body := string(ctx.Response.Body())
		if sc := ctx.Response.StatusCode(); sc != tc.code {
			t.Errorf("?%s: status %d, want %d: %s", tc.query, sc, tc.code, body)
			continue
		}
		if tc.code == 400 {
			if !strings.Contains(body, `"code":"invalid_refresh"`) || !strings.Contains(string(ctx.Response.Header.ContentType()), "json") {
				t.Errorf("?%s: 400 body %q", tc.query, body)
			}
			continue
		}
		if got := parseDOM(t, body).metaRefresh(); got != tc.meta {
			t.Errorf("?%s: meta refresh %q, want %q", tc.query, got, tc.meta)
		}
	}
}

// A node serving HTTPS shows its refused handshakes by reason; one
// without --tls-cert shows no TLS line.
func TestPage_TLSHandshakes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures []uint64
		want     string
	}{
		{"plain HTTP", nil, ""},
		{"HTTPS", []uint64{4, 0, 2, 1}, "HTTPS; refused handshakes since start: not_tls 4, no_client_cert 0, bad_client_cert 2, other 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			self := selfFixture()
			self.TLSHandshakeFailures = tc.failures
			p := newPage(t, SourceFuncs{SelfFunc: func() nodestate.Snapshot { return self }}, nil)
			var buf bytes.Buffer
			if err := p.Render(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			got := ""
			if n := parseDOM(t, buf.String()).byID("self-tls"); n != nil {
				got = textOf(n)
			}
			if got != tc.want {
				t.Errorf("#self-tls = %q, want %q", got, tc.want)
			}
		})
	}
}

// ?limit=N pages the cluster table: at most N nodes (this node added when
// the page left it out), the cluster's total said above the table, the
// source asked for that page size; a bad limit is a 400 naming it.
func TestPage_Limit(t *testing.T) {
	const total = 30
	var workers []coordinator.WorkerInfo
	for i := range total {
		workers = append(workers, coordinator.WorkerInfo{WorkerID: int64(100 + i), NodeKey: fmt.Sprintf("p%02d", i), Stopped: true, LastReportAgeMs: -1})
	}
	var asked atomic.Int64
	src := SourceFuncs{SelfFunc: selfFixture, WorkerPageFunc: func(ctx context.Context, limit int) (coordinator.WorkerPage, error) {
		if _, ok := ctx.Deadline(); !ok {
			return coordinator.WorkerPage{}, context.Canceled // the page must bound the call
		}
		asked.Store(int64(limit))
		return coordinator.WorkerPage{Workers: workers[:min(limit, total)], Total: total, Limit: limit}, nil
	}}
	p := newPage(t, src, nil)
	tests := []struct {
		query     string
		code      int
		wantLimit int64
		wantRows  int    // this node's row included
		wantNote  string // in #nodes-total
	}{
		{"", 200, coordinator.DefaultWorkerPageLimit, total + 1, "this view lists at most 100."},
		{"limit=5", 200, 5, 5 + 1, "?limit=30 lists more"},
		{"limit=1000&refresh=5", 200, 1000, total + 1, "this view lists at most 1000."},
		{"limit=0", 400, 0, 0, ""},
		{"limit=1001", 400, 0, 0, ""},
		{"limit=-3", 400, 0, 0, ""},
		{"limit=many", 400, 0, 0, ""},
		{"limit=5&limit=6", 400, 0, 0, ""},
	}
	for _, tc := range tests {
		t.Run("?"+tc.query, func(t *testing.T) {
			asked.Store(0)
			ctx := &fasthttp.RequestCtx{}
			ctx.Request.Header.SetMethod(fasthttp.MethodGet)
			ctx.Request.SetRequestURI("/status?" + tc.query)
			p.Handler()(ctx)
			body := string(ctx.Response.Body())
			if sc := ctx.Response.StatusCode(); sc != tc.code {
				t.Fatalf("status %d, want %d: %s", sc, tc.code, body)
			}
			if tc.code == 400 {
				if !strings.Contains(body, `"code":"invalid_parameter"`) || !strings.Contains(body, "limit") ||
					!strings.Contains(string(ctx.Response.Header.ContentType()), "json") || asked.Load() != 0 {
					t.Errorf("400 body %q (source asked for %d)", body, asked.Load())
				}
				return
			}
			if got := asked.Load(); got != tc.wantLimit {
				t.Errorf("the source was asked for %d rows, want %d", got, tc.wantLimit)
			}
			d := parseDOM(t, body)
			if len(d.rows) != tc.wantRows {
				t.Errorf("%d rows, want %d", len(d.rows), tc.wantRows)
			}
			if got := textOf(d.byID("nodes-total-count")); got != fmt.Sprint(total) {
				t.Errorf("total %q, want %d", got, total)
			}
			if got := textOf(d.byID("nodes-total")); !strings.Contains(got, tc.wantNote) {
				t.Errorf("#nodes-total %q, want it to say %q", got, tc.wantNote)
			}
		})
	}
}

// A source without a page function is paged from its whole list.
func TestSourceFuncs_WorkerPageFallsBackToWorkers(t *testing.T) {
	rows := []coordinator.WorkerInfo{{WorkerID: 1}, {WorkerID: 2}, {WorkerID: 3}}
	src := SourceFuncs{SelfFunc: selfFixture, WorkersFunc: func(context.Context) ([]coordinator.WorkerInfo, error) { return rows, nil }}
	for _, tc := range []struct{ limit, want int }{{1, 1}, {3, 3}, {100, 3}} {
		pg, err := src.WorkerPage(context.Background(), tc.limit)
		if err != nil || len(pg.Workers) != tc.want || pg.Total != len(rows) {
			t.Errorf("limit %d: %d rows, total %d, %v; want %d, %d", tc.limit, len(pg.Workers), pg.Total, err, tc.want, len(rows))
		}
	}
}
