package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

func TestIntegration_Segment(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	startWorker(t, zk, "segtest", "node-a", "127.0.0.1:18091", false) // creates the cluster
	z := zk.ConnectString()
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		wantOut string
		wantErr string
	}{
		{"create", []string{"create", "orders", "--zk", z, "--cluster", "segtest", "--start", "1000", "--step", "50", "--description", "order numbers"}, 0, `created tag "orders": first ID 1000, step 50 (max 50000)`, ""},
		{"create twice", []string{"create", "orders", "--zk", z, "--cluster", "segtest"}, 1, "", "tag exists"},
		{"create with bad name", []string{"create", "a/b", "--zk", z, "--cluster", "segtest"}, 2, "", "invalid tag"},
		{"create with step 0", []string{"create", "x", "--zk", z, "--cluster", "segtest", "--step", "0"}, 2, "", "step 0"},
		{"create with start 0", []string{"create", "x", "--zk", z, "--cluster", "segtest", "--start", "0"}, 2, "", "start 0"},
		{"create with a token", []string{"create", "secret", "--require-token", "--max-count", "20", "--zk", z, "--cluster", "segtest"}, 0, "shown once", "WARNING: without --zk-auth"},
		{"create with a negative max count", []string{"create", "x", "--max-count", "-1", "--zk", z, "--cluster", "segtest"}, 2, "", "max count -1"},
		{"rotate", []string{"token", "rotate", "secret", "--grace", "1m", "--zk", z, "--cluster", "segtest"}, 0, "stay valid for 1m0s", ""},
		{"rotate a plain tag", []string{"token", "rotate", "orders", "--zk", z, "--cluster", "segtest"}, 2, "", "requires no token"},
		{"rotate an unknown tag", []string{"token", "rotate", "nope", "--zk", z, "--cluster", "segtest"}, 1, "", "unknown tag"},
		{"token, unknown action", []string{"token", "show", "secret", "--zk", z, "--cluster", "segtest"}, 2, "", `unknown action "show"`},
		{"rotate, negative grace", []string{"token", "rotate", "secret", "--grace", "-1s", "--zk", z, "--cluster", "segtest"}, 2, "", "--grace -1s"},
		{"rotate without a tag", []string{"token", "rotate", "--zk", z}, 2, "", "want 2 argument"},
		{"status of a token tag", []string{"status", "secret", "--zk", z, "--cluster", "segtest"}, 0, "requires a token, at most 20 IDs per request", ""},
		{"create a daily tag", []string{"create", "daily", "--reset", "daily", "--tz", "Asia/Shanghai", "--format", "NO{date}{seq:6}", "--zk", z, "--cluster", "segtest"}, 0, `resets daily in Asia/Shanghai: IDs print as "NO{date}{seq:6}", e.g. NO`, ""},
		{"create a monthly tag, default format", []string{"create", "monthly", "--reset", "monthly", "--zk", z, "--cluster", "segtest"}, 0, `resets monthly in UTC: IDs print as "{date}{seq:6}"`, ""},
		{"create, bad reset", []string{"create", "x", "--reset", "hourly", "--zk", z, "--cluster", "segtest"}, 2, "", `reset "hourly": want daily, monthly or yearly`},
		{"create, bad zone", []string{"create", "x", "--reset", "daily", "--tz", "Mars/Base", "--zk", z, "--cluster", "segtest"}, 2, "", `time zone "Mars/Base"`},
		{"create, format without date", []string{"create", "x", "--reset", "daily", "--format", "{seq:6}", "--zk", z, "--cluster", "segtest"}, 2, "", "no {date}"},
		{"create, --tz without --reset", []string{"create", "x", "--tz", "UTC", "--zk", z, "--cluster", "segtest"}, 2, "", "--tz and --format go with --reset"},
		{"create, opaque and reset", []string{"create", "x", "--opaque", "--digits", "8", "--reset", "daily", "--zk", z, "--cluster", "segtest"}, 2, "", "opaque or resets by period, not both"},
		{"status of a daily tag", []string{"status", "daily", "--zk", z, "--cluster", "segtest"}, 0, `resets daily (zone Asia/Shanghai), prints "NO{date}{seq:6}"`, ""},
		{"list", []string{"list", "--zk", z, "--cluster", "segtest"}, 0, "orders", ""},
		{"status of an unknown tag", []string{"status", "nope", "--zk", z, "--cluster", "segtest"}, 1, "", "unknown tag"},
		{"no subcommand", nil, 2, "", "want a subcommand"},
		{"unknown subcommand", []string{"drop", "orders"}, 2, "", "unknown subcommand"},
		{"status without a tag", []string{"status", "--zk", z}, 2, "", "want 1 argument"},
		{"no --zk", []string{"list"}, 2, "", "--zk is required"},
		{"unknown cluster", []string{"list", "--zk", z, "--cluster", "nosuch"}, 1, "", `cluster "nosuch" does not exist`},
	} {
		code, out, errOut := runSegment(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", tc.name, code, out, errOut, tc.code, tc.wantOut, tc.wantErr)
		}
	}

	checkSegmentStatusTally(t, z)
	checkSegmentStatusPeriod(t, z)
}

// checkSegmentStatusPeriod has a node start today's period of tag daily
// and checks that segment status shows it, with the next number no node
// holds.
func checkSegmentStatusPeriod(t *testing.T, z string) {
	t.Helper()
	ctx := context.Background()
	st, tag := segtestTag(t, z, "daily")
	rule, err := tag.Reset.Compile()
	if err != nil {
		t.Fatal(err)
	}
	key := rule.PeriodOf(time.Now())
	if _, _, err := st.AllocPeriod(ctx, "daily", tag.Incarnation, 10, key); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"cluster", "list", "--zk", z}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "reset_tags") {
		t.Errorf("cluster list after segment create --reset: exit %d: %s %s; want the cluster to require reset_tags", code, out.String(), errOut.String())
	}
	want := fmt.Sprintf("period %s (%s): started at counter 1, 10 numbers handed to nodes since; the next no node holds prints NO%s000011", key, rule.Date(key), rule.Date(key))
	if code, out, errOut := runSegment("status", "daily", "--zk", z, "--cluster", "segtest"); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("status: exit %d, %q %q; want %q", code, out, errOut, want)
	}
}

// runSegment runs snowflakectl segment with args and returns its exit
// code, stdout and stderr.
func runSegment(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := Main(append([]string{"segment"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// segtestTag opens a store on cluster segtest, as a node does (closed at
// the test's end), and reads tag's record.
func segtestTag(t *testing.T, z, name string) (*segment.ZKStore, segment.Tag) {
	t.Helper()
	ctx := context.Background()
	st, err := segment.OpenZK(ctx, segment.ZKConfig{Servers: strings.Split(z, ","), Cluster: "segtest", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	tag, err := st.Tag(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return st, tag
}

// checkSegmentStatusTally has a node of cluster segtest take a range of
// orders and give part of it back, and checks that segment status
// accounts for every ID once, also when two records list one range.
func checkSegmentStatusTally(t *testing.T, z string) {
	t.Helper()
	ctx := context.Background()
	st, tag := segtestTag(t, z, "orders")
	r, _, err := st.Alloc(ctx, "orders", tag.Incarnation, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Return(ctx, "orders", tag.Incarnation, segment.Range{Lo: r.Lo + 30, Hi: r.Hi}); err != nil {
		t.Fatal(err)
	}
	if err := st.Publish(ctx, "orders", "node-a", []segment.Range{{Lo: r.Lo + 20, Hi: r.Lo + 30}}); err != nil {
		t.Fatal(err)
	}
	rep := segtestOrdersStatus(t, z)
	if rep.HandedOut != 50 || rep.ReturnedIDs != 20 || rep.HeldIDs != 10 || rep.IssuedOrLost != 20 || rep.IssuedOrLostAtMost != 30 || rep.Tag.Description != "order numbers" || len(rep.Holders["node-a"]) != 1 {
		t.Fatalf("status: %+v", rep)
	}
	checkSegtestOrdersTable(t, z, `tag "orders": start 1000, max_id 1050`, "handed out 50 = returned 20 + in live nodes' ranges 10 + issued or lost 20\n",
		"issued or lost, with what the live nodes issued from their ranges since loading them: 20 to 30 (= 20 + 0 to 10: nodes publish", "[1030,1050)", "node-a", "[1020,1030)")

	// A second record lists the whole range, the part returned included
	// (a holder whose record is not yet cleared): every ID counts once.
	if err := st.Publish(ctx, "orders", "node-b", []segment.Range{r}); err != nil {
		t.Fatal(err)
	}
	rep = segtestOrdersStatus(t, z)
	if rep.HandedOut != 50 || rep.ReturnedIDs != 20 || rep.HeldIDs != 30 || rep.IssuedOrLost != 0 || rep.IssuedOrLostAtMost != 30 {
		t.Errorf("status with overlapping records: %+v, want handed out 50 = returned 20 + held 30 + issued or lost 0, at most 30", rep)
	}
	checkSegtestOrdersTable(t, z, "handed out 50 = returned 20 + in live nodes' ranges 30 + issued or lost 0\n")
}

// segtestOrdersStatus runs segment status --json on tag orders of cluster
// segtest and returns its report.
func segtestOrdersStatus(t *testing.T, z string) SegmentStatus {
	t.Helper()
	code, out, errOut := runSegment("status", "orders", "--zk", z, "--cluster", "segtest", "--json")
	if code != 0 {
		t.Fatalf("status --json: %d %s", code, errOut)
	}
	var rep SegmentStatus
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json %q: %v", out, err)
	}
	return rep
}

// checkSegtestOrdersTable runs segment status on tag orders of cluster
// segtest and checks that it succeeds and prints each of wants.
func checkSegtestOrdersTable(t *testing.T, z string, wants ...string) {
	t.Helper()
	code, out, _ := runSegment("status", "orders", "--zk", z, "--cluster", "segtest")
	for _, want := range wants {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status table: exit %d, %q lacks %q", code, out, want)
		}
	}
}

// segment delete on a cluster an older release created (the flat znode,
// no required features) first makes it require tag incarnations: a node
// of a release that keys ranges by tag name alone can no longer join it
// and mix the deleted tag's ranges into a tag created again.
func TestIntegration_SegmentDeleteRequiresTagIncarnations(t *testing.T) {
	zkc := zkharness.StartStandalone(t)
	servers := zkc.ConnectString()
	conn, _, err := zk.Connect([]string{servers}, 5*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	flat, err := json.Marshal(snowflake.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	flat = append(flat[:len(flat)-1], `,"incarnation":"older-release"}`...)
	for _, p := range []struct {
		path string
		data []byte
	}{{"/snowflaked", nil}, {"/snowflaked/old", flat}} {
		if _, err := conn.Create(p.path, p.data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p.path, err)
		}
	}
	ctx := context.Background()
	st, err := segment.OpenZK(ctx, segment.ZKConfig{Servers: []string{servers}, Cluster: "old", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(ctx, segment.Tag{Name: "orders", Start: 1, Step: 10, MaxStep: 10}); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"segment", "delete", "orders", "--yes", "--zk", servers, "--cluster", "old"}, &stdout, &stderr); code != 0 {
		t.Fatalf("segment delete: %d %s %s", code, stdout.String(), stderr.String())
	}
	b, _, err := conn.Get("/snowflaked/old")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"requires"`) || !strings.Contains(string(b), coordinator.FeatureTagIncarnation) {
		t.Fatalf("cluster znode after segment delete: %s; want it to require %s", b, coordinator.FeatureTagIncarnation)
	}
	if _, err := st.Tag(ctx, "orders"); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("tag after delete: %v", err)
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// rng is a segment.Range for the tables below.
func rng(lo, hi int64) segment.Range { return segment.Range{Lo: lo, Hi: hi} }

// segment status's figures add up: handed out = returned + in live nodes'
// ranges + issued or lost, each ID counted once whatever the records say,
// and the span of issued-or-lost runs from that figure to it plus the live
// nodes' ranges.
func TestTally(t *testing.T) {
	for _, tc := range []struct {
		name       string
		start, max int64
		returned   []segment.Range
		holders    map[string][]segment.Range
		// returned, held, issued or lost, at most, outside
		want [5]int64
	}{
		{"no node holds a range: exact", 1000, 1050, []segment.Range{rng(1030, 1050)}, nil, [5]int64{20, 0, 30, 30, 0}},
		{"live ranges: a span", 100000, 2640000, nil, map[string][]segment.Range{"a": {rng(800000, 1720000)}, "b": {rng(1720000, 2640000)}}, [5]int64{0, 1840000, 700000, 2540000, 0}},
		{"a record still lists a range its node returned", 1000, 1050, []segment.Range{rng(1030, 1050)}, map[string][]segment.Range{"a": {rng(1000, 1050)}}, [5]int64{20, 30, 0, 30, 0}},
		{"two records list one range (the old holder's not yet cleared)", 1000, 1100, nil, map[string][]segment.Range{"a": {rng(1000, 1100)}, "b": {rng(1050, 1100)}}, [5]int64{0, 100, 0, 100, 0}},
		{"one record lists overlapping ranges", 1000, 1100, nil, map[string][]segment.Range{"a": {rng(1000, 1060), rng(1040, 1080)}}, [5]int64{0, 80, 20, 100, 0}},
		{"ranges at or above max_id (max_id went back)", 1000, 1100, []segment.Range{rng(1090, 1120)}, map[string][]segment.Range{"a": {rng(1100, 1200)}}, [5]int64{10, 0, 90, 90, 100}},
		{"nothing handed out", 1, 1, nil, nil, [5]int64{0, 0, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tally("orders", segment.Tag{Start: tc.start, MaxID: tc.max}, tc.returned, tc.holders)
			got := [5]int64{r.ReturnedIDs, r.HeldIDs, r.IssuedOrLost, r.IssuedOrLostAtMost, r.OutsideIDs}
			if got != tc.want {
				t.Errorf("returned, held, issued or lost, at most, outside = %v, want %v", got, tc.want)
			}
			if r.HandedOut != tc.max-tc.start || r.ReturnedIDs+r.HeldIDs+r.IssuedOrLost != r.HandedOut || r.IssuedOrLostAtMost != r.IssuedOrLost+r.HeldIDs || r.IssuedOrLost < 0 {
				t.Errorf("figures do not add up: %+v", r)
			}
			checkStatusText(t, r)
		})
	}
}

// checkStatusText checks that the figures segment status prints add up:
// the first line's sum, and the span's bounds (issued or lost, plus 0 to
// the live nodes' ranges), present exactly when nodes hold ranges.
func checkStatusText(t *testing.T, r SegmentStatus) {
	t.Helper()
	var b bytes.Buffer
	writeSegmentStatus(&b, r)
	out := b.String()
	var h, ret, held, lost int64
	sum := regexp.MustCompile(`(?m)^handed out (\d+) = returned (\d+) \+ in live nodes' ranges (\d+) \+ issued or lost (\d+)$`).FindStringSubmatch(out)
	if sum == nil {
		t.Fatalf("no sum line in:\n%s", out)
	}
	for i, p := range []*int64{&h, &ret, &held, &lost} {
		*p, _ = strconv.ParseInt(sum[i+1], 10, 64)
	}
	if h != ret+held+lost || h != r.HandedOut {
		t.Errorf("printed %d = %d + %d + %d (handed out %d):\n%s", h, ret, held, lost, r.HandedOut, out)
	}
	span := regexp.MustCompile(`issued or lost, with what the live nodes issued from their ranges since loading them: (\d+) to (\d+) \(= (\d+) \+ 0 to (\d+):`).FindStringSubmatch(out)
	if (span != nil) != (held > 0) {
		t.Fatalf("span line present %v with %d IDs in live nodes' ranges:\n%s", span != nil, held, out)
	}
	if span != nil {
		want := []string{strconv.FormatInt(lost, 10), strconv.FormatInt(lost+held, 10), strconv.FormatInt(lost, 10), strconv.FormatInt(held, 10)}
		if !slices.Equal(span[1:], want) {
			t.Errorf("span %v, want %v:\n%s", span[1:], want, out)
		}
	}
	if strings.Contains(out, "outside [start, max_id)") != (r.OutsideIDs > 0) {
		t.Errorf("outside line with %d IDs outside:\n%s", r.OutsideIDs, out)
	}
}
