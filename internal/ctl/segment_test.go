package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := Main(append([]string{"segment"}, args...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
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
		{"list", []string{"list", "--zk", z, "--cluster", "segtest"}, 0, "orders", ""},
		{"status of an unknown tag", []string{"status", "nope", "--zk", z, "--cluster", "segtest"}, 1, "", "unknown tag"},
		{"no subcommand", nil, 2, "", "want a subcommand"},
		{"unknown subcommand", []string{"drop", "orders"}, 2, "", "unknown subcommand"},
		{"status without a tag", []string{"status", "--zk", z}, 2, "", "want 1 argument"},
		{"no --zk", []string{"list"}, 2, "", "--zk is required"},
		{"unknown cluster", []string{"list", "--zk", z, "--cluster", "nosuch"}, 1, "", `cluster "nosuch" does not exist`},
	} {
		code, out, errOut := run(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q", tc.name, code, out, errOut, tc.code, tc.wantOut, tc.wantErr)
		}
	}

	// A node takes a range and gives part of it back: status accounts for it.
	ctx := context.Background()
	st, err := segment.OpenZK(ctx, segment.ZKConfig{Servers: strings.Split(z, ","), Cluster: "segtest", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tag, err := st.Tag(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
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
	code, out, errOut := run("status", "orders", "--zk", z, "--cluster", "segtest", "--json")
	if code != 0 {
		t.Fatalf("status --json: %d %s", code, errOut)
	}
	var rep SegmentStatus
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json %q: %v", out, err)
	}
	if rep.HandedOut != 50 || rep.ReturnedIDs != 20 || rep.HeldIDs != 10 || rep.IssuedOrLost != 20 || rep.IssuedOrLostAtMost != 30 || rep.Tag.Description != "order numbers" || len(rep.Holders["node-a"]) != 1 {
		t.Fatalf("status: %+v", rep)
	}
	code, out, _ = run("status", "orders", "--zk", z, "--cluster", "segtest")
	for _, want := range []string{`tag "orders": start 1000, max_id 1050`, "handed out 50: returned 20, in live nodes' ranges 10, issued or lost 20 to 30 (live nodes publish", "[1030,1050)", "node-a", "[1020,1030)"} {
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
