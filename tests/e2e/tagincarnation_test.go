package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// droppedLog is the log line of a node that drops the ranges of a tag
// deleted under it.
const droppedLog = "segment: the incarnation of the tag this node holds ranges of is gone (deleted, perhaps created again): its ranges are dropped, never returned"

// segmentNumbers asks p for count numbers of tag (in no order: opaque
// numbers are not increasing).
func segmentNumbers(t *testing.T, p *proc, tag string, count int) []int64 {
	t.Helper()
	code, body := p.get("/segment/" + tag + "?count=" + strconv.Itoa(count))
	if code != http.StatusOK {
		t.Fatalf("/segment/%s?count=%d: %d %s", tag, count, code, body)
	}
	var out []int64
	for _, f := range strings.Fields(body) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("/segment/%s: %q: %v", tag, f, err)
		}
		out = append(out, id)
	}
	if len(out) != count {
		t.Fatalf("/segment/%s?count=%d: %d numbers", tag, count, len(out))
	}
	return out
}

// numberBook collects numbers and counts those handed out twice, and those
// that are not D-digit numbers when digits > 0.
type numberBook struct {
	t      *testing.T
	digits int
	seen   map[int64]string
	twice  int
	bad    int
}

func (b *numberBook) add(who string, ids []int64) {
	b.t.Helper()
	lo, hi := int64(1), int64(1<<62)
	if b.digits > 0 {
		lo = 1
		for range b.digits - 1 {
			lo *= 10
		}
		hi = 10*lo - 1
	}
	for _, id := range ids {
		if id < lo || id > hi {
			if b.bad++; b.bad <= 3 {
				b.t.Errorf("%s: %d is not a %d-digit number", who, id, b.digits)
			}
		}
		if prev, ok := b.seen[id]; ok {
			if b.twice++; b.twice <= 3 {
				b.t.Errorf("%d handed out twice: by %s and %s", id, prev, who)
			}
		}
		b.seen[id] = who
	}
}

// deleteTreeByHand removes a znode and its subtree with a ZooKeeper client
// of its own, as an operator with zkCli (or an older snowflakectl) would.
func deleteTreeByHand(t *testing.T, servers, path string) {
	t.Helper()
	conn := rawZK(t, servers)
	var del func(p string) error
	del = func(p string) error {
		kids, _, err := conn.Children(p)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := del(p + "/" + k); err != nil {
				return err
			}
		}
		return conn.Delete(p, -1)
	}
	if err := del(path); err != nil {
		t.Fatalf("delete %s by hand: %v", path, err)
	}
}

// rawZK is a ZooKeeper client of the test's own on servers, closed at
// cleanup.
func rawZK(t *testing.T, servers string) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect(strings.Split(servers, ","), 5*time.Second, zk.WithLogger(zkNoLog{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

type zkNoLog struct{}

func (zkNoLog) Printf(string, ...any) {}

// A tag deleted and created again shares nothing with the one before. Node
// A serves the tag; the tag is deleted and created again; node B serves the
// new one; A is stopped cleanly and restarted, then killed (-9) while it
// holds ranges of the new tag, the tag deleted and created once more, B
// stopped cleanly and restarted, and A restarted. Every number the two nodes hand out of each new tag is
// counted: none twice (and, opaque, each of 8 digits). On 5f6c4e9 A's clean
// stop gave its old range back into the new tag, and its restart after the
// kill resumed the gone tag's range as the new one's: the same numbers from
// both nodes.
func TestIntegration_SegmentTagDeletedAndCreatedAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		create []string
		digits int
		byHand bool // deleted in ZooKeeper by hand, not by snowflakectl
	}{
		{name: "plain tag, segment delete", create: []string{"--step", "200"}},
		{name: "opaque tag, segment delete", create: []string{"--step", "200", "--opaque", "--digits", "8", "--reuse-numbers"}, digits: 8},
		{name: "plain tag, deleted by hand", create: []string{"--step", "200"}, byHand: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zkc := zkharness.StartStandalone(t)
			servers := zkc.ConnectString()
			const cluster = "recreate"
			zkArgs := []string{"--zk", servers, "--cluster", cluster}
			createTag := func() {
				t.Helper()
				args := append(append([]string{"segment", "create", "orders"}, tc.create...), zkArgs...)
				if code, out, errOut := ctl(t, args...); code != 0 {
					t.Fatalf("segment create: %d %s %s", code, out, errOut)
				}
			}
			deleteTag := func() {
				t.Helper()
				if tc.byHand {
					deleteTreeByHand(t, servers, "/snowflaked/"+cluster+"/segments/orders")
					return
				}
				if code, out, errOut := ctl(t, append([]string{"segment", "delete", "orders", "--yes"}, zkArgs...)...); code != 0 {
					t.Fatalf("segment delete: %d %s %s", code, out, errOut)
				}
			}
			dirA := t.TempDir()
			argsA := clusterArgs(dirA, servers, cluster, "node-a")
			a := &segNode{p: startNode(t, binSnowflaked, argsA)}
			createTag()
			a.waitSegmentReady(t)
			segmentNumbers(t, a.p, "orders", 30) // A holds the rest of its ranges

			deleteTag()
			createTag()
			book := &numberBook{t: t, digits: tc.digits, seen: map[int64]string{}}
			argsB := clusterArgs(t.TempDir(), servers, cluster, "node-b")
			b := &segNode{p: startNode(t, binSnowflaked, argsB)}
			b.waitSegmentReady(t)
			book.add("B", segmentNumbers(t, b.p, "orders", 300))
			a.p.signal(syscall.SIGTERM)
			if code := a.p.exitCode(); code != 0 {
				t.Fatalf("A: SIGTERM: exit %d", code)
			}
			a.p = startNode(t, binSnowflaked, argsA)
			a.waitSegmentReady(t)
			for i := range 3 {
				book.add(fmt.Sprintf("A after its clean restart (%d)", i), segmentNumbers(t, a.p, "orders", 150))
				book.add(fmt.Sprintf("B (%d)", i), segmentNumbers(t, b.p, "orders", 150))
			}
			t.Logf("first new tag: %d numbers from two nodes, %d twice, %d malformed", len(book.seen), book.twice, book.bad)

			// A holds ranges of this incarnation in its state file; the tag goes
			// and comes again while A is dead. B, which holds ranges of it too,
			// is restarted cleanly (as docs/segments.md asks of every node that
			// held ranges of a deleted tag) after the create: its stop must not
			// give them back into the new tag.
			a.p.signal(syscall.SIGKILL)
			a.p.exitCode()
			deleteTag()
			createTag()
			b.p.signal(syscall.SIGTERM)
			if code := b.p.exitCode(); code != 0 {
				t.Fatalf("B: SIGTERM: exit %d", code)
			}
			b.p = startNode(t, binSnowflaked, argsB)
			b.waitSegmentReady(t)
			second := &numberBook{t: t, digits: tc.digits, seen: map[int64]string{}}
			second.add("B", segmentNumbers(t, b.p, "orders", 300))
			a.p = startNode(t, binSnowflaked, argsA)
			a.waitSegmentReady(t)
			for i := range 3 {
				second.add(fmt.Sprintf("A after kill -9 (%d)", i), segmentNumbers(t, a.p, "orders", 150))
				second.add(fmt.Sprintf("B (%d)", i), segmentNumbers(t, b.p, "orders", 150))
			}
			t.Logf("second new tag: %d numbers from two nodes, %d twice, %d malformed", len(second.seen), second.twice, second.bad)

			// Both nodes keep running while the tag goes and comes once more:
			// each one's poll of the tag finds the delete within half a second,
			// and it drops its ranges before the tag is created again. Each
			// may have logged a drop before (A at its restart, of the gone
			// incarnation in its state file): wait for one more, this delete's.
			dropsBefore := []int{a.p.CountLog(droppedLog), b.p.CountLog(droppedLog)}
			deleteTag()
			for i, n := range []*segNode{a, b} {
				if _, err := n.p.WaitLogAfter(droppedLog, dropsBefore[i], readyTimeout); err != nil {
					t.Fatalf("%v; stderr:\n%s", err, n.p.Output())
				}
			}
			createTag()
			third := &numberBook{t: t, digits: tc.digits, seen: map[int64]string{}}
			for i := range 3 {
				third.add(fmt.Sprintf("A, kept running (%d)", i), segmentNumbers(t, a.p, "orders", 150))
				third.add(fmt.Sprintf("B, kept running (%d)", i), segmentNumbers(t, b.p, "orders", 150))
			}
			t.Logf("third new tag: %d numbers from two nodes, %d twice, %d malformed", len(third.seen), third.twice, third.bad)
			if book.twice+second.twice+third.twice+book.bad+second.bad+third.bad > 0 {
				t.Fatalf("%d, %d and %d numbers handed out twice, %d, %d and %d malformed", book.twice, second.twice, third.twice, book.bad, second.bad, third.bad)
			}
		})
	}
}

// An opaque tag across kill -9 and clean restarts of its node: every
// answer an 8-digit number, none twice. On 5f6c4e9 the restarted node
// served its resumed ranges as the raw counter (101 102 103 …).
func TestIntegration_OpaqueTagAcrossRestarts(t *testing.T) {
	zkc := zkharness.StartStandalone(t)
	servers := zkc.ConnectString()
	const cluster = "opaquerestart"
	dir := t.TempDir()
	args := clusterArgs(dir, servers, cluster, "node-o")
	n := &segNode{p: startNode(t, binSnowflaked, args)}
	if code, out, errOut := ctl(t, "segment", "create", "acct", "--opaque", "--digits", "8", "--step", "100", "--zk", servers, "--cluster", cluster); code != 0 {
		t.Fatalf("segment create: %d %s %s", code, out, errOut)
	}
	n.waitSegmentReady(t)
	book := &numberBook{t: t, digits: 8, seen: map[int64]string{}}
	for i, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGKILL, syscall.SIGKILL, syscall.SIGTERM} {
		for k := range 3 {
			book.add(fmt.Sprintf("run %d", i), segmentNumbers(t, n.p, "acct", 50+k))
		}
		n.p.signal(sig)
		n.p.exitCode()
		n.p = startNode(t, binSnowflaked, args)
		// The first answer after the restart, before segment mode has a
		// session: the resumed ranges, or 503, never the counter.
		if code, body := n.p.get("/segment/acct?count=20"); code == http.StatusOK {
			book.add(fmt.Sprintf("first answer after restart %d (%s)", i, sig), parseFields(t, body))
		}
		n.waitSegmentReady(t)
	}
	book.add("last run", segmentNumbers(t, n.p, "acct", 100))
	t.Logf("%d numbers across 3 kill -9 and 2 clean restarts: %d twice, %d not 8 digits", len(book.seen), book.twice, book.bad)
	if book.twice+book.bad > 0 {
		t.Fatalf("%d numbers twice, %d not of 8 digits", book.twice, book.bad)
	}
}

func parseFields(t *testing.T, body string) []int64 {
	t.Helper()
	var out []int64
	for _, f := range strings.Fields(body) {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("%q: %v", f, err)
		}
		out = append(out, id)
	}
	return out
}

// segment delete needs --yes; set-max raises max_id only, naming both
// numbers when asked to lower it, and with --drop-returned drops the
// returned ranges (none here); both name a missing tag.
func TestIntegration_SegmentDeleteAndSetMaxCommands(t *testing.T) {
	zkc := zkharness.StartStandalone(t)
	servers := zkc.ConnectString()
	const cluster = "segcmds"
	p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), servers, cluster, "node-c"))
	zkArgs := []string{"--zk", servers, "--cluster", cluster}
	if code, out, errOut := ctl(t, append([]string{"segment", "create", "orders", "--step", "100"}, zkArgs...)...); code != 0 {
		t.Fatalf("segment create: %d %s %s", code, out, errOut)
	}
	(&segNode{p: p}).waitSegmentReady(t)
	first := segmentNumbers(t, p, "orders", 10)
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		out     string // in stdout
		errText string // in stderr
	}{
		{"delete without --yes", []string{"segment", "delete", "orders"}, 2, "", "without --yes"},
		{"set-max not a number", []string{"segment", "set-max", "orders", "lots"}, 2, "", `"lots"`},
		{"set-max below max_id", []string{"segment", "set-max", "orders", "50"}, 2, "", "to 50"},
		{"set-max raises", []string{"segment", "set-max", "orders", "100000"}, 0, "-> 100000", ""},
		{"set-max equal", []string{"segment", "set-max", "orders", "100000"}, 0, "already", ""},
		{"set-max --drop-returned equal", []string{"segment", "set-max", "orders", "100000", "--drop-returned"}, 0, "dropped 0 returned range(s), 0 IDs", ""},
		{"set-max --drop-returned below max_id", []string{"segment", "set-max", "orders", "50", "--drop-returned"}, 2, "", "to 50"},
		{"set-max of a missing tag", []string{"segment", "set-max", "nope", "10"}, 1, "", "unknown tag"},
		{"delete a missing tag", []string{"segment", "delete", "nope", "--yes"}, 1, "", "unknown tag"},
	} {
		code, out, errOut := ctl(t, append(tc.args, zkArgs...)...)
		if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errOut, tc.errText) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, %q in stdout, %q in stderr", tc.name, code, out, errOut, tc.code, tc.out, tc.errText)
		}
	}
	// The refusal names the current max_id too.
	if _, _, errOut := ctl(t, append([]string{"segment", "set-max", "orders", "50"}, zkArgs...)...); !strings.Contains(errOut, "100000") {
		t.Errorf("set-max below: %q does not name the current max_id", errOut)
	}
	// The node's next range starts at the new max_id (after what it holds).
	deadline := time.Now().Add(readyTimeout)
	for {
		ids := segmentNumbers(t, p, "orders", 50)
		if ids[len(ids)-1] >= 100000 {
			break
		}
		if ids[0] < first[0] || time.Now().After(deadline) {
			t.Fatalf("numbers %d…%d after set-max 100000", ids[0], ids[len(ids)-1])
		}
	}
	code, out, errOut := ctl(t, append([]string{"segment", "delete", "orders", "--yes"}, zkArgs...)...)
	if code != 0 || !strings.Contains(out, "deleted tag") || !strings.Contains(errOut, "node-c") {
		t.Fatalf("segment delete --yes: %d %q %q; want it done, naming node-c as a holder", code, out, errOut)
	}
	if code, _, errOut := ctl(t, append([]string{"segment", "status", "orders"}, zkArgs...)...); code == 0 || !strings.Contains(errOut, "unknown tag") {
		t.Fatalf("status after delete: %d %s", code, errOut)
	}
}
