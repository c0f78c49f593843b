package e2e

import (
	"bytes"
	"fmt"
	"image/png"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/html"

	"codeberg.org/snowflaked/snowflaked/tests/chromium"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// statusRow is one row of the status page's table#nodes as rendered.
type statusRow struct {
	classes []string
	worker  string            // data-worker
	cells   map[string]string // text of each cell by its role class (worker, key, addr, service, state, ntp, peer, report, note)
}

// parseStatusTable reads the rows of table#nodes from a rendered page.
func parseStatusTable(t *testing.T, page string) []statusRow {
	t.Helper()
	root, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("parse the page: %v", err)
	}
	var table *html.Node
	for n := range root.Descendants() {
		if n.Type == html.ElementNode && attr(n, "id") == "nodes" {
			table = n
			break
		}
	}
	if table == nil {
		t.Fatalf("no table#nodes in the page:\n%s", page)
	}
	var rows []statusRow
	for tr := range table.Descendants() {
		if tr.Type != html.ElementNode || tr.Data != "tr" || attr(tr, "data-worker") == "" {
			continue
		}
		r := statusRow{classes: strings.Fields(attr(tr, "class")), worker: attr(tr, "data-worker"), cells: map[string]string{}}
		for td := range tr.ChildNodes() {
			if td.Type != html.ElementNode || td.Data != "td" {
				continue
			}
			for _, c := range strings.Fields(attr(td, "class")) {
				if c != "num" && c != "over" {
					r.cells[c] = text(td)
				}
			}
		}
		rows = append(rows, r)
	}
	return rows
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// text is the node's text content with white space collapsed, a block
// element (div, p, br) counting as a space and a <wbr> as nothing.
func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		switch {
		case d.Type == html.TextNode:
			b.WriteString(d.Data)
		case d.Type == html.ElementNode && (d.Data == "div" || d.Data == "p" || d.Data == "br"):
			b.WriteByte(' ')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// A 3-node ZooKeeper cluster of real processes: node 1's /status, loaded in
// headless Chromium, lists all three workers with their node keys,
// addresses and worker IDs, in service, with each peer's clock fetched;
// and a screenshot of it is saved.
func TestIntegration_StatusPageCluster(t *testing.T) {
	bin := chromium.Need(t)
	zk := zkharness.StartStandalone(t)
	var nodes []*proc
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "status", fmt.Sprintf("node-%d", i))))
	}
	workers := map[string]string{} // node key → worker ID
	addrs := map[string]string{}   // node key → address
	for i, p := range nodes {
		p.waitReadyz(http.StatusOK, readyTimeout)
		key := fmt.Sprintf("node-%d", i+1)
		_, w := decodeMs(p.ids(1)[0])
		workers[key], addrs[key] = strconv.FormatInt(w, 10), p.addr
	}
	// Every node in service as ZooKeeper sees it (alive znodes), and the
	// page's cached worker list caught up with that.
	url := "http://" + nodes[0].addr + "/status"
	deadline := time.Now().Add(readyTimeout)
	for {
		code, body := nodes[0].get("/status")
		if code == http.StatusOK && strings.Contains(body, "Cluster: 3 nodes, 3 in service") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/status of node-1 never listed 3 nodes in service within %s: %d\n%s", readyTimeout, code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// 1. The DOM as Chromium rendered it. On a loaded machine a node may
	// leave service for a moment (a fence write slower than a third of
	// --fence-ahead) between the wait above and the render: render again,
	// a bounded number of times, until the page shows all three in service.
	var dom string
	var rows []statusRow
	for attempt := 1; ; attempt++ {
		dom = string(chromium.Run(t, bin, url, "--dump-dom"))
		rows = parseStatusTable(t, dom)
		if attempt == 5 || !slices.ContainsFunc(rows, func(r statusRow) bool { return r.cells["service"] != "yes" }) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(rows) != 3 {
		t.Fatalf("%d rows in the rendered table, want 3:\n%s", len(rows), dom)
	}
	checkRenderedRows(t, rows, workers, addrs)

	// 2. A screenshot.
	checkScreenshot(t, bin, url)

	// 3. node-3 frozen (SIGSTOP), node-2 stopped cleanly (SIGTERM): node-1's
	// page says so, and flags the frozen one's overdue report.
	nodes[2].signal(syscall.SIGSTOP)
	t.Cleanup(func() { nodes[2].signal(syscall.SIGCONT) })
	nodes[1].signal(syscall.SIGTERM)
	if code := nodes[1].exitCode(); code != 0 {
		t.Fatalf("node-2 exit %d after SIGTERM", code)
	}
	frozen, stopped := waitFrozenAndStopped(t, nodes[0])
	if !strings.Contains(frozen.cells["note"], "report overdue") || !strings.Contains(frozen.cells["note"], "does not answer") {
		t.Errorf("the frozen node's notes %q do not say why it is flagged", frozen.cells["note"])
	}
	if !slices.Contains(stopped.classes, "down") || !strings.Contains(stopped.cells["note"], "stopped cleanly") {
		t.Errorf("the stopped node's row: classes %v, notes %q", stopped.classes, stopped.cells["note"])
	}
	data, _ := chromium.Screenshot(t, bin, url, 1200, 900)
	chromium.Keep(t, data, "status-cluster-frozen.png")
}

// checkRenderedRows checks each rendered row is one known node, once, with
// its worker ID, address and state; node-1's is marked self, and the
// others' clocks were asked for.
func checkRenderedRows(t *testing.T, rows []statusRow, workers, addrs map[string]string) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range rows {
		key := r.cells["key"]
		want, ok := workers[key]
		if !ok || seen[key] {
			t.Errorf("row with node key %q (known: %v, seen before: %v)", key, ok, seen[key])
			continue
		}
		seen[key] = true
		self := key == "node-1"
		if r.worker != want || !strings.HasPrefix(r.cells["worker"], want) {
			t.Errorf("%s: worker %q (%q), want %s", key, r.worker, r.cells["worker"], want)
		}
		if r.cells["addr"] != addrs[key] {
			t.Errorf("%s: address %q, want %s", key, r.cells["addr"], addrs[key])
		}
		if r.cells["service"] != "yes" || !strings.HasPrefix(r.cells["state"], "in_service") {
			t.Errorf("%s: in service %q, state %q; want yes, in_service", key, r.cells["service"], r.cells["state"])
		}
		if slices.Contains(r.classes, "self") != self {
			t.Errorf("%s: row classes %v (self: %v)", key, r.classes, self)
		}
		// The peers' clocks were asked for over HTTP: an offset, not "—".
		if !self && !strings.HasSuffix(r.cells["peer"], "s") {
			t.Errorf("%s: clock − this node %q, want an offset (note %q)", key, r.cells["peer"], r.cells["note"])
		}
		if strings.Contains(r.cells["report"], "never") {
			t.Errorf("%s: last report %q", key, r.cells["report"])
		}
	}
}

// checkScreenshot takes a 1200x900 screenshot of url, checks it is a PNG
// of that size that is not blank, and keeps it.
func checkScreenshot(t *testing.T, bin, url string) {
	t.Helper()
	data, path := chromium.Screenshot(t, bin, url, 1200, 900)
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 900 {
		t.Errorf("screenshot is %dx%d, want 1200x900", b.Dx(), b.Dy())
	}
	colours := map[uint32]bool{}
	for y := 0; y < img.Bounds().Dy() && len(colours) < 1000; y += 3 {
		for x := 0; x < img.Bounds().Dx(); x += 3 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|b>>8] = true
		}
	}
	if len(colours) < 20 {
		t.Errorf("screenshot has %d colours: a blank or broken page", len(colours))
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(data))
	chromium.Keep(t, data, "status-cluster.png")
}

// waitFrozenAndStopped polls viewer's /status (30s) until node-3 is
// unreachable and flagged and node-2 stopped, and returns their rows.
func waitFrozenAndStopped(t *testing.T, viewer *proc) (frozen, stopped statusRow) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := viewer.get("/status")
		for _, r := range parseStatusTable(t, body) {
			switch r.cells["key"] {
			case "node-3":
				frozen = r
			case "node-2":
				stopped = r
			}
		}
		if frozen.cells["state"] == "unreachable" && slices.Contains(frozen.classes, "flagged") && stopped.cells["state"] == "stopped" {
			return frozen, stopped
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 30s, frozen node-3: %+v; stopped node-2: %+v", frozen, stopped)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
