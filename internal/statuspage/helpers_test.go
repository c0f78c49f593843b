package statuspage

import (
	"context"
	"encoding/json"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/html"

	"codeberg.org/snowflaked/snowflaked/clockguard"
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/nodestate"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// domRow is one <tr> of the nodes table as a browser sees it.
type domRow struct {
	classes []string
	worker  string            // data-worker
	cells   map[string]string // text of each <td>, by its role class (worker, key, addr, …)
	over    map[string]bool   // role class → the cell has class "over"
	markers map[string]int    // role class → .marker spans in the cell
}

func (r domRow) hasClass(c string) bool { return slices.Contains(r.classes, c) }

// negativeAge matches an age written as negative: "(-51.25s ago)".
var negativeAge = regexp.MustCompile(`\(-[0-9]`)

// dom is a parsed page.
type dom struct {
	root *html.Node
	rows []domRow
}

// parseDOM parses a page and extracts the rows of table#nodes (none when
// the page has no such table: a standalone node's).
func parseDOM(t testing.TB, page string) *dom {
	t.Helper()
	root, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("parse page: %v", err)
	}
	d := &dom{root: root}
	table := d.byID("nodes")
	if table == nil {
		return d
	}
	for n := range table.Descendants() {
		if n.Type != html.ElementNode || n.Data != "tr" || !hasTD(n) {
			continue
		}
		r := domRow{classes: strings.Fields(attr(n, "class")), worker: attr(n, "data-worker"),
			cells: map[string]string{}, over: map[string]bool{}, markers: map[string]int{}}
		for td := range n.ChildNodes() {
			if td.Type != html.ElementNode || td.Data != "td" {
				continue
			}
			classes := strings.Fields(attr(td, "class"))
			role := ""
			for _, c := range classes {
				if c != "num" && c != "over" {
					role = c
				}
			}
			r.cells[role] = textOf(td)
			r.over[role] = slices.Contains(classes, "over")
			for m := range td.Descendants() {
				if m.Type == html.ElementNode && slices.Contains(strings.Fields(attr(m, "class")), "marker") {
					r.markers[role]++
				}
			}
		}
		d.rows = append(d.rows, r)
	}
	return d
}

func hasTD(tr *html.Node) bool {
	for c := range tr.ChildNodes() {
		if c.Type == html.ElementNode && c.Data == "td" {
			return true
		}
	}
	return false
}

// byID returns the element with that id, or nil.
func (d *dom) byID(id string) *html.Node {
	for n := range d.root.Descendants() {
		if n.Type == html.ElementNode && attr(n, "id") == id {
			return n
		}
	}
	return nil
}

// metaRefresh is the content of <meta http-equiv="refresh">, or "".
func (d *dom) metaRefresh() string {
	for _, m := range d.elements("meta") {
		if attr(m, "http-equiv") == "refresh" {
			return attr(m, "content")
		}
	}
	return ""
}

// elements returns every element named tag.
func (d *dom) elements(tag string) []*html.Node {
	var out []*html.Node
	for n := range d.root.Descendants() {
		if n.Type == html.ElementNode && n.Data == tag {
			out = append(out, n)
		}
	}
	return out
}

// row returns the row whose key cell is key.
func (d *dom) row(t testing.TB, key string) domRow {
	t.Helper()
	for _, r := range d.rows {
		if r.cells["key"] == key {
			return r
		}
	}
	t.Fatalf("no row with node key %q (rows: %+v)", key, d.rows)
	return domRow{}
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// textOf is the text content of n.
func textOf(n *html.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return strings.TrimSpace(b.String())
}

// fakeSource is a Source with settable answers.
type fakeSource struct {
	mu      sync.Mutex
	self    nodestate.Snapshot
	selfFn  func() nodestate.Snapshot // when set, Self calls it instead of returning self
	workers []coordinator.WorkerInfo
	err     error
	calls   int
}

func (s *fakeSource) Self() nodestate.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.selfFn != nil {
		return s.selfFn()
	}
	return s.self
}

func (s *fakeSource) Workers(ctx context.Context) ([]coordinator.WorkerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if _, ok := ctx.Deadline(); !ok {
		return nil, context.Canceled // the page must bound the call
	}
	return s.workers, s.err
}

// clockAnswer is what a fake node's GET /clock says.
type clockAnswer struct {
	workerID  int64
	skew      time.Duration // the fake node's clock minus the real one
	ntpOffset time.Duration // its NTP offset (server minus node); 0 with ntp nil
	ntp       bool
	state     health.State
	reason    health.Reason
	detail    string
}

// clockBody builds a GET /clock body shaped like the node's ClockInfo.
func clockBody(a clockAnswer) []byte {
	now := time.Now().Add(a.skew)
	doc := map[string]any{
		"mode": "zookeeper", "worker_id": a.workerID, "now_ms": now.UnixMilli(),
		"last_issued_ms": now.UnixMilli() - 5, "fence_ms": now.UnixMilli() + 3000,
		"state": a.state.String(), "reason": string(a.reason), "detail": a.detail,
		"zk": coordinator.Status{WorkerID: a.workerID, Connected: true, SessionState: "StateHasSession", LeaseHeld: true, LastReportAgeMs: 800},
	}
	if a.ntp {
		doc["ntp"] = clockguard.NTPSnapshot{Enabled: true, MaxOffset: defaultNTPMaxOffset, Servers: []string{"ntp.test:123"},
			Last: &clockguard.NTPResult{Server: "ntp.test:123", Offset: a.ntpOffset, RTT: time.Millisecond, CheckedAt: now.Add(-10 * time.Second)}}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

// serveHandler serves h on a fresh 127.0.0.1 port until the test ends and
// returns the address.
func serveHandler(t testing.TB, h fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := &fasthttp.Server{Handler: h, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.ShutdownWithContext(ctx); err != nil {
			t.Errorf("shutdown of the server on %s: %v", ln.Addr(), err)
		}
		<-done
	})
	return ln.Addr().String()
}

// frozenAddr is a loopback address whose listener accepts connections (the
// kernel completes them) but never reads or answers: a frozen process.
func frozenAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln.Addr().String()
}

// fakeNode serves GET /clock with a's figures (fresh on every request) and
// returns its address.
func fakeNode(t testing.TB, a clockAnswer) string {
	t.Helper()
	return serveHandler(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != clockPath {
			ctx.Error("not found", fasthttp.StatusNotFound)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(clockBody(a))
	})
}

// newPage builds a page over src with the system clock; mod may change the
// config.
func newPage(t testing.TB, src Source, mod func(*Config)) *Page {
	t.Helper()
	cfg := Config{Source: src, Clock: clock.NewSystem(), FetchTimeout: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("new page: %v", err)
	}
	return p
}

// get calls the page's handler as method /status.
func get(t testing.TB, p *Page, method string) *fasthttp.RequestCtx {
	t.Helper()
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.Header.SetMethod(method)
	ctx.Request.SetRequestURI("/status")
	p.Handler()(ctx)
	return ctx
}

// selfFixture is a "this node" in service, worker 1.
func selfFixture() nodestate.Snapshot {
	ntp := clockguard.NTPSnapshot{Enabled: true, Last: &clockguard.NTPResult{Server: "ntp.test:123", Offset: -3 * time.Millisecond, CheckedAt: time.Now()}}
	zk := coordinator.Status{WorkerID: 1, Connected: true, SessionState: "StateHasSession", SessionID: "0x1f", LeaseHeld: true, LastReportAgeMs: 1200}
	return nodestate.Snapshot{NodeKey: "node-1", Addr: "127.0.0.1:18080", Mode: nodestate.ModeZooKeeper, WorkerID: 1,
		Cluster: "metrics-test", Version: "v1.2.3 (go1.26)", Layout: snowflake.DefaultLayout(),
		Readings: clockguard.Readings{State: health.InService, Since: time.Now().Add(-time.Minute), NTP: &ntp},
		Fence:    snowflake.UnixMilliOf(time.Now().Add(3 * time.Second)), ZK: &zk}
}

// withPeerRound returns self with a last peer round of the clock guard that
// measured results.
func withPeerRound(self nodestate.Snapshot, results ...clockguard.PeerResult) nodestate.Snapshot {
	self.Peers = &clockguard.PeerSnapshot{CheckedAt: time.Now(), Reachable: len(results), Peers: results}
	return self
}

// peerAt is one peer measured by a peer round: its clock minus this node's
// is offset.
func peerAt(workerID int64, addr string, offset time.Duration) clockguard.PeerResult {
	return clockguard.PeerResult{WorkerID: workerID, Addr: addr, Offset: offset, RTT: time.Millisecond, CheckedAt: time.Now()}
}
