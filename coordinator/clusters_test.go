package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// oldDecode is how releases before the features list (5baa9d7, 5f6c4e9)
// start decoding the cluster znode: the layout from the top-level object.
func oldDecode(b []byte) error {
	var l snowflake.Layout
	return json.Unmarshal(b, &l)
}

// oldSegmentDecode is how those releases' segment mode reads the cluster's
// incarnation (segment.ZKStore.Incarnation): a node resumed from its cache
// file while ZooKeeper was down reaches it without the coordinator's check,
// so it must fail on its own.
func oldSegmentDecode(b []byte) error {
	var d struct {
		Incarnation string `json:"incarnation"`
	}
	return json.Unmarshal(b, &d)
}

func TestEditDistanceAndNearMatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  string
	}{
		{"prdo", []string{"default", "prod"}, "prod"},
		{"prod2", []string{"prod", "staging"}, "prod"},
		{"stagign", []string{"prod", "staging"}, "staging"},
		{"eu-west", []string{"prod", "staging"}, ""},
		{"prod", []string{"prod"}, ""},
		{"x", nil, ""},
	} {
		if got := nearMatch(tc.name, tc.names); got != tc.want {
			t.Errorf("nearMatch(%q, %q) = %q, want %q", tc.name, tc.names, got, tc.want)
		}
	}
}

func TestIntegration_MissingClusterRefusedAndNothingCreated(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	raw := rawConn(t, srv, "")
	typo := testConfig(t, srv, "typo")
	typo.Cluster, typo.CreateCluster = "prdo", false

	// An empty ensemble: not even the root is created.
	_, err := newCoord(t, typo).Claim(context.Background(), Prior{})
	if !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), `cluster "prdo" does not exist`) || !strings.Contains(err.Error(), "no cluster there yet") {
		t.Fatalf("Claim on an empty ensemble: %v, want ErrNoCluster naming prdo", err)
	}
	if ok, _ := exists(t, raw, "/snowflaked"); ok {
		t.Fatal("a refused claim created /snowflaked")
	}

	prod := testConfig(t, srv, "prod-a")
	prod.Cluster = "prod"
	mustClaim(t, newCoord(t, prod))
	_, err = newCoord(t, typo).Claim(context.Background(), Prior{})
	for _, want := range []string{`cluster "prdo" does not exist`, "the clusters there are prod", "did you mean prod?", "snowflakectl cluster create prdo"} {
		if !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Claim of a mistyped cluster: %v, want ErrNoCluster with %q", err, want)
		}
	}
	if ok, _ := exists(t, raw, "/snowflaked/prdo"); ok {
		t.Fatal("a refused claim created /snowflaked/prdo")
	}
	rows, err := testAdmin(t, srv, "", 5*time.Second).ListClusters(context.Background())
	if err != nil || len(rows) != 1 || rows[0].Name != "prod" || rows[0].Workers != 1 {
		t.Fatalf("ListClusters = %+v, %v; want prod alone with 1 worker", rows, err)
	}
}

func TestIntegration_ClusterCreateListDelete(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	spec := ClusterSpec{Layout: snowflake.DefaultLayout(), WorkerIDs: WorkerRange{0, 511}, RecycleAfter: time.Hour}
	createEuAndOverlappingUs(t, srv, spec)

	cfg := testConfig(t, srv, "eu-a")
	cfg.Cluster, cfg.CreateCluster, cfg.WorkerIDs = "eu", false, WorkerRange{0, 511}
	c := newCoord(t, cfg)
	id := mustClaim(t, c)
	checkListedEu(t, srv)

	adm := testAdmin(t, srv, "", 5*time.Second)
	err := adm.DeleteCluster(ctx, "eu")
	if !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), `node key "eu-a"`) {
		t.Fatalf("DeleteCluster with a lease held: %v, want ErrLeaseHeld naming eu-a", err)
	}
	if err := c.Close(ctx, 0); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv, "")
	checkDeleteRefusedWhileFenceAhead(t, srv, raw)
	// The fence passes (written back by hand: time moving on).
	d, st := readForeverData(t, raw, id.Path)
	d.Fence = snowflake.UnixMilliOf(time.Now().Add(-time.Minute))
	if _, err := raw.Set(id.Path, mustMarshal(t, d), st.Version); err != nil {
		t.Fatal(err)
	}
	if err := adm.DeleteCluster(ctx, "eu"); err != nil {
		t.Fatalf("DeleteCluster: %v", err)
	}
	if err := adm.DeleteCluster(ctx, "eu"); !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), "the clusters there are us") {
		t.Fatalf("DeleteCluster of a deleted cluster: %v, want ErrNoCluster", err)
	}
	rows, err := adm.ListClusters(ctx)
	if err != nil || len(rows) != 2 || rows[1].Name != "us" || rows[1].Deleted || rows[0].Name != "eu" || !rows[0].Deleted || rows[0].Tombstone == nil ||
		rows[0].Tombstone.WorkerIDs != "0-511" || rows[0].Tombstone.Layout != "41/10/12" {
		t.Fatalf("ListClusters after delete = %+v, %v; want us and eu's tombstone", rows, err)
	}
}

// createEuAndOverlappingUs creates cluster eu with spec (again: a no-op;
// with another range: refused), then us on a range overlapping eu's, which
// is created with a warning naming both.
func createEuAndOverlappingUs(t *testing.T, srv []string, spec ClusterSpec) {
	t.Helper()
	ctx := context.Background()
	adm := testAdmin(t, srv, "", 5*time.Second)
	res, err := adm.CreateCluster(ctx, "eu", spec)
	if err != nil || !res.Created || !slices.Equal(res.Requires, []string{FeatureTagIncarnation, featureWorkerIDRange}) || len(res.Overlaps) != 0 {
		t.Fatalf("CreateCluster eu = %+v, %v", res, err)
	}
	if res, err = adm.CreateCluster(ctx, "eu", spec); err != nil || res.Created {
		t.Fatalf("CreateCluster eu again (same settings) = %+v, %v; want no-op", res, err)
	}
	other := spec
	other.WorkerIDs = WorkerRange{0, 255}
	if _, err = adm.CreateCluster(ctx, "eu", other); !errors.Is(err, ErrClusterMismatch) ||
		!strings.Contains(err.Error(), "--worker-id-range 0-511, asked for 0-255") {
		t.Fatalf("CreateCluster eu with another range: %v, want ErrClusterMismatch naming both", err)
	}
	us := spec
	us.WorkerIDs = WorkerRange{256, 767}
	res, err = adm.CreateCluster(ctx, "us", us)
	if err != nil || len(res.Overlaps) != 1 || res.Overlaps[0].Name != "eu" ||
		!strings.Contains(res.Overlaps[0].Warning, `cluster "us" (worker IDs 256-767`) || !strings.Contains(res.Overlaps[0].Warning, `cluster "eu" (worker IDs 0-511`) ||
		!strings.Contains(res.Overlaps[0].Warning, "may collide if they ever meet") {
		t.Fatalf("CreateCluster us (overlapping) = %+v, %v; want a warning naming both", res, err)
	}
}

// checkListedEu checks ListClusters shows both clusters, eu first with its
// settings and its one worker.
func checkListedEu(t *testing.T, srv []string) {
	t.Helper()
	ctx := context.Background()
	rows, err := testAdmin(t, srv, "", 5*time.Second).ListClusters(ctx)
	if err != nil || len(rows) != 2 {
		t.Fatalf("ListClusters = %+v, %v", rows, err)
	}
	if r := rows[0]; r.Name != "eu" || r.Layout != "41/10/12" || r.WorkerIDs != "0-511" || r.Workers != 1 || r.RecycleAfter != "1h0m0s" ||
		!slices.Equal(r.Requires, []string{FeatureTagIncarnation, featureWorkerIDRange}) || r.Problem != "" {
		t.Errorf("row eu = %+v", r)
	}
}

// checkDeleteRefusedWhileFenceAhead: the lease is gone but the fence is
// still ahead: a node killed, or cut off from ZooKeeper, may issue up to
// it. Refused, and the mark undone.
func checkDeleteRefusedWhileFenceAhead(t *testing.T, srv []string, raw *zk.Conn) {
	t.Helper()
	ctx := context.Background()
	before, _, err := raw.Get("/snowflaked/eu")
	if err != nil {
		t.Fatal(err)
	}
	err = testAdmin(t, srv, "", 5*time.Second).DeleteCluster(ctx, "eu")
	if !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "may still issue IDs until its ZooKeeper fence") {
		t.Fatalf("DeleteCluster with a fence ahead: %v, want ErrLeaseHeld naming the fence", err)
	}
	if after, _, err := raw.Get("/snowflaked/eu"); err != nil || string(after) != string(before) {
		t.Fatalf("after a refused delete the cluster znode is %s, %v; want it restored to %s", after, err, before)
	}
}

// TestIntegration_FeaturesGate: a node refuses a cluster that requires a
// feature (or a format) it does not know, and a cluster whose range a
// release before the features list recorded in the flat shape is rewritten
// in the shape those releases refuse when this release joins it.
func TestIntegration_FeaturesGate(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	raw := rawConn(t, srv, "")
	if _, err := raw.Create("/snowflaked", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	l := snowflake.DefaultLayout()
	layoutJSON := string(mustMarshal(t, l))
	flat := func(extra string) []byte { return []byte(strings.TrimSuffix(layoutJSON, "}") + extra + "}") }
	for _, tc := range []struct {
		name, cluster string
		data          []byte
		wantErr       string // "" when the claim succeeds
		wantRequires  []string
		wantFlat      bool
	}{
		{"unknown feature", "teleport", []byte(`{"format":2,"requires":["teleport"],"layout":` + layoutJSON + `,"recycle_after_ms":3600000,"incarnation":"i"}`),
			`requires teleport, which this release does not know`, nil, false},
		{"newer format", "future", []byte(`{"format":3,"requires":["x"],"layout":` + layoutJSON + `}`), "format 3", nil, false},
		{"flat range upgraded", "ranged", flat(`,"worker_id_range":"512-1023","recycle_after_ms":3600000,"incarnation":"i"`),
			"", []string{featureWorkerIDRange}, false},
		{"flat plain stays flat", "plain", flat(`,"recycle_after_ms":3600000,"incarnation":"i"`), "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/snowflaked/" + tc.cluster
			if _, err := raw.Create(path, tc.data, 0, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			if tc.wantFlat || tc.wantErr == "" {
				if err := oldDecode(tc.data); err != nil {
					t.Fatalf("before: an old release cannot read the flat shape: %v", err)
				}
			}
			cfg := testConfig(t, srv, "n-"+tc.cluster)
			cfg.Cluster, cfg.CreateCluster = tc.cluster, false
			if tc.cluster == "ranged" {
				cfg.WorkerIDs = WorkerRange{512, 1023}
			}
			_, err := newCoord(t, cfg).Claim(context.Background(), Prior{})
			if tc.wantErr != "" {
				if !errors.Is(err, ErrUnknownFeature) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Claim: %v, want ErrUnknownFeature with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Claim: %v", err)
			}
			b, _, err := raw.Get(path)
			if err != nil {
				t.Fatal(err)
			}
			d, err := decodeCluster(b)
			if err != nil || !slices.Equal(d.Requires, tc.wantRequires) {
				t.Fatalf("after: %s decodes to requires %v, %v; want %v", b, d.Requires, err, tc.wantRequires)
			}
			if err := oldDecode(b); (err == nil) != tc.wantFlat {
				t.Fatalf("after: old release's decode of %s: %v, want it to fail = %v", b, err, !tc.wantFlat)
			}
		})
	}
}

func TestIntegration_RequireFeature(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	cfg := testConfig(t, srv, "a")
	c := newCoord(t, cfg)
	mustClaim(t, c)
	raw := rawConn(t, srv, "")
	path := "/snowflaked/test"
	b, _, _ := raw.Get(path)
	d, err := decodeCluster(b)
	if err != nil || !slices.Equal(d.Requires, []string{FeatureTagIncarnation}) {
		t.Fatalf("a cluster created by a node requires %v (%v), want [%s]", d.Requires, err, FeatureTagIncarnation)
	}
	// An old-shape cluster (written flat, as by 5f6c4e9) gets the feature.
	flat := map[string]any{"layout": "41/10/12", "epoch": "2024-01-01T00:00:00Z", "time_unit": "1ms", "incarnation": d.Incarnation, "recycle_after_ms": 3600000}
	if _, err := raw.Set(path, mustMarshal(t, flat), -1); err != nil {
		t.Fatal(err)
	}
	z := clientFor(t, c)
	for range 2 { // the second call is a no-op
		if err := RequireFeature(context.Background(), z, path, FeatureTagIncarnation); err != nil {
			t.Fatalf("RequireFeature: %v", err)
		}
	}
	b, st, _ := raw.Get(path)
	if d, err := decodeCluster(b); err != nil || !slices.Equal(d.Requires, []string{FeatureTagIncarnation}) || oldDecode(b) == nil || st.Version != 2 {
		t.Fatalf("after RequireFeature: %s (version %d), %v", b, st.Version, err)
	}
	if err := RequireFeature(context.Background(), z, path, "teleport"); !errors.Is(err, ErrUnknownFeature) {
		t.Fatalf("RequireFeature of an unknown feature: %v", err)
	}
}

// clientFor is a zkclient.Client on c's claimed session.
func clientFor(t *testing.T, c *Coordinator) zkclient.Client {
	t.Helper()
	conn := c.getConn()
	if conn == nil {
		t.Fatal("coordinator has no connection")
	}
	return zkclient.Client{Conn: conn, Timeout: 5 * time.Second}
}

// TestIntegration_NodeStartWarnsOfOverlappingRanges: a node that creates
// or joins a cluster whose worker-ID range overlaps another cluster's on
// the ensemble logs a warning naming both; disjoint ranges give none.
func TestIntegration_NodeStartWarnsOfOverlappingRanges(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	for _, tc := range []struct {
		cluster string
		ids     WorkerRange
		warn    bool
	}{
		{"eu", WorkerRange{0, 511}, false},
		{"us", WorkerRange{512, 1023}, false},
		{"ap", WorkerRange{500, 600}, true},
	} {
		var logs testsupport.SyncBuffer
		cfg := testConfig(t, srv, "n-"+tc.cluster)
		cfg.Cluster, cfg.WorkerIDs, cfg.Log = tc.cluster, tc.ids, testsupport.Log(t, &logs)
		mustClaim(t, newCoord(t, cfg))
		got := logs.String()
		for _, other := range []string{`cluster \"eu\" (worker IDs 0-511`, `cluster \"us\" (worker IDs 512-1023`} {
			if has := strings.Contains(got, other) && strings.Contains(got, "may collide if they ever meet"); has != tc.warn {
				t.Errorf("%s: warning naming %s = %v, want %v; log:\n%s", tc.cluster, other, has, tc.warn, got)
			}
		}
	}
}

// TestClusterDataShapes: the features a cluster's settings imply, and
// that each shape decodes back to what was written while only the flat
// one is readable by releases before the features list.
func TestClusterDataShapes(t *testing.T) {
	gene := snowflake.DefaultLayout()
	gene.GeneBits = 3
	for _, tc := range []struct {
		name  string
		d     clusterData
		want  []string
		extra []string // required besides the implied ones
	}{
		{"plain", clusterData{Layout: snowflake.DefaultLayout(), WorkerIDs: WorkerRange{0, 1023}}, nil, nil},
		{"range", clusterData{Layout: snowflake.DefaultLayout(), WorkerIDs: WorkerRange{512, 1023}}, []string{featureWorkerIDRange}, nil},
		{"gene bits", clusterData{Layout: gene, WorkerIDs: WorkerRange{0, 1023}}, []string{featureGeneBits}, nil},
		{"range, gene bits and tags", clusterData{Layout: gene, WorkerIDs: WorkerRange{0, 7}}, []string{featureGeneBits, featureWorkerIDRange},
			[]string{FeatureTagIncarnation}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := impliedFeatures(tc.d); !slices.Equal(got, tc.want) {
				t.Fatalf("impliedFeatures = %v, want %v", got, tc.want)
			}
			d := tc.d.withFeatures(append(impliedFeatures(tc.d), tc.extra...)...)
			d.Incarnation, d.RecycleAfterMs = "inc", 1000
			b := mustMarshal(t, d)
			back, err := decodeCluster(b)
			if err != nil || !back.Layout.Equal(d.Layout) || back.WorkerIDs != d.WorkerIDs || !slices.Equal(back.Requires, d.Requires) ||
				back.Incarnation != "inc" || back.RecycleAfterMs != 1000 {
				t.Fatalf("decode(%s) = %+v, %v; want %+v", b, back, err, d)
			}
			if oldErr := oldDecode(b); (oldErr == nil) != (len(d.Requires) == 0) {
				t.Fatalf("an old release's decode of %s: %v; want it to fail exactly when features are required (%v)", b, oldErr, d.Requires)
			}
			if oldErr := oldSegmentDecode(b); (oldErr == nil) != (len(d.Requires) == 0) {
				t.Fatalf("an old release's segment mode reading %s: %v; want it to fail exactly when features are required (%v)", b, oldErr, d.Requires)
			}
		})
	}
}
