package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

func TestSetTopLevelInt(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, wantErr string
	}{
		{"flat: replaced in place", `{"epoch":"e","incarnation":"i","layout":"41/10/12","recycle_after_ms":3600000,"time_unit":"1ms"}`,
			`{"epoch":"e","incarnation":"i","layout":"41/10/12","recycle_after_ms":300000,"time_unit":"1ms"}`, ""},
		{"format 2: order kept", `{"format":2,"requires":["x"],"layout":{"layout":"41/10/12","recycle_after_ms":1},"recycle_after_ms":3600000,"incarnation":{"id":"i"}}`,
			`{"format":2,"requires":["x"],"layout":{"layout":"41/10/12","recycle_after_ms":1},"recycle_after_ms":300000,"incarnation":{"id":"i"}}`, ""},
		{"spaces kept", "{ \"a\" : 1 ,\n \"recycle_after_ms\" :  7 \n}", "{ \"a\" : 1 ,\n \"recycle_after_ms\" :  300000 \n}", ""},
		{"absent: added last", `{"layout":"41/10/12","incarnation":"i"}`, `{"layout":"41/10/12","incarnation":"i","recycle_after_ms":300000}`, ""},
		{"absent from an empty object", `{}`, `{"recycle_after_ms":300000}`, ""},
		{"a string holding the key is no member", `{"note":"\"recycle_after_ms\":1","recycle_after_ms":2}`, `{"note":"\"recycle_after_ms\":1","recycle_after_ms":300000}`, ""},
		{"twice", `{"recycle_after_ms":1,"recycle_after_ms":2}`, "", "appears twice"},
		{"not an object", `[1]`, "", "not a JSON object"},
		{"truncated", `{"recycle_after_ms":1`, "", "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := setTopLevelInt([]byte(tc.in), "recycle_after_ms", 300000)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("setTopLevelInt(%s) = %s, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("setTopLevelInt(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
			}
		})
	}
}

// SetCluster rewrites recycle_after_ms and nothing else, byte for byte, in
// every shape a cluster znode has; the same value again writes nothing;
// cluster list shows the new value.
func TestIntegration_SetClusterChangesOnlyRecycleAfter(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	raw := rawConn(t, srv, "")
	ctx := context.Background()
	if _, err := testAdmin(t, srv, "", 5*time.Second).CreateCluster(ctx, "ranged", ClusterSpec{Layout: snowflake.DefaultLayout(), WorkerIDs: WorkerRange{512, 1023}, RecycleAfter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	layoutJSON := strings.TrimSuffix(string(mustMarshal(t, snowflake.DefaultLayout())), "}")
	for _, c := range []struct{ name, data string }{
		// A flat cluster as releases before the features list wrote it.
		{"flat", layoutJSON + `,"incarnation":"inc-1","recycle_after_ms":3600000}`},
		// One written before recycle_after_ms existed, no node of this release joined yet.
		{"flat-old", layoutJSON + `,"incarnation":"inc-2"}`},
	} {
		if _, err := raw.Create("/snowflaked/"+c.name, []byte(c.data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		cluster string
		old     time.Duration
		format2 bool
	}{
		{"ranged", time.Hour, true},
		{"flat", time.Hour, false},
		{"flat-old", 0, false},
	} {
		t.Run(tc.cluster, func(t *testing.T) {
			checkSetRecycleAfter(t, raw, srv, tc.cluster, tc.old, tc.format2)
		})
	}
	checkRecycleAfterKept(t, srv)
}

// checkSetRecycleAfter sets cluster's recycle-after from old to 5m and
// checks that only recycle_after_ms changed, byte for byte and in the
// znode's shape (format 2 or flat), and that the same value again writes
// nothing.
func checkSetRecycleAfter(t *testing.T, raw *zk.Conn, srv []string, cluster string, old time.Duration, format2 bool) {
	t.Helper()
	ctx := context.Background()
	path := "/snowflaked/" + cluster
	before, stBefore, err := raw.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.HasPrefix(string(before), `{"format":2,"requires":[`); got != format2 {
		t.Fatalf("before: %s; want format 2 = %v", before, format2)
	}
	adm := testAdmin(t, srv, "", 5*time.Second)
	res, err := adm.SetCluster(ctx, cluster, ClusterChange{RecycleAfter: 5 * time.Minute})
	if err != nil || !res.Changed || res.OldRecycleAfter != old || res.RecycleAfter != 5*time.Minute {
		t.Fatalf("SetCluster = %+v, %v; want changed %v → 5m", res, err, old)
	}
	after, stAfter, err := raw.Get(path)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(before), `"recycle_after_ms":3600000`, `"recycle_after_ms":300000`, 1)
	if old == 0 {
		want = strings.TrimSuffix(string(before), "}") + `,"recycle_after_ms":300000}`
	}
	if string(after) != want || stAfter.Version != stBefore.Version+1 {
		t.Fatalf("after SetCluster the znode is (version %d)\n%s\nwant (version %d)\n%s", stAfter.Version, after, stBefore.Version+1, want)
	}
	b, a := decodeForTest(t, before), decodeForTest(t, after)
	if a.RecycleAfterMs != 300000 || a.Incarnation != b.Incarnation || a.WorkerIDs != b.WorkerIDs || !a.Layout.Equal(b.Layout) ||
		strings.Join(a.Requires, ",") != strings.Join(b.Requires, ",") {
		t.Fatalf("decoded before %+v, after %+v: only recycle-after may change", b, a)
	}
	if (oldDecode(after) == nil) != !format2 {
		t.Fatalf("the shape changed: an old release's decode of %s: %v", after, oldDecode(after))
	}

	res, err = adm.SetCluster(ctx, cluster, ClusterChange{RecycleAfter: 5 * time.Minute})
	if err != nil || res.Changed || res.OldRecycleAfter != 5*time.Minute {
		t.Fatalf("SetCluster of the same value = %+v, %v; want nothing to do", res, err)
	}
	if _, st, _ := raw.Get(path); st.Version != stAfter.Version {
		t.Fatalf("SetCluster of the same value wrote the znode (version %d → %d)", stAfter.Version, st.Version)
	}
}

// checkRecycleAfterKept checks, after every cluster's recycle-after was
// set to 5m, that cluster list shows it and that cluster create run again
// accepts it unless it asks for another value.
func checkRecycleAfterKept(t *testing.T, srv []string) {
	t.Helper()
	ctx := context.Background()
	adm := testAdmin(t, srv, "", 5*time.Second)
	rows, err := adm.ListClusters(ctx)
	if err != nil || len(rows) != 3 {
		t.Fatalf("ListClusters = %+v, %v", rows, err)
	}
	for _, r := range rows {
		if r.RecycleAfter != "5m0s" || r.Problem != "" {
			t.Errorf("list row %+v: want recycle-after 5m0s", r)
		}
	}
	// cluster create run again (an init container's) accepts the value set
	// unless it asks for another one.
	spec := ClusterSpec{Layout: snowflake.DefaultLayout(), WorkerIDs: WorkerRange{512, 1023}}
	if res, err := adm.CreateCluster(ctx, "ranged", spec); err != nil || res.Created || res.RecycleAfter != 5*time.Minute {
		t.Fatalf("CreateCluster without recycle-after after SetCluster = %+v, %v; want nothing to do, recycle-after 5m", res, err)
	}
	spec.RecycleAfter = time.Hour
	if _, err := adm.CreateCluster(ctx, "ranged", spec); !errors.Is(err, ErrClusterMismatch) ||
		!strings.Contains(err.Error(), "--recycle-after 5m0s, asked for 1h0m0s") {
		t.Fatalf("CreateCluster with the old recycle-after after SetCluster: %v, want ErrClusterMismatch naming both", err)
	}
}

// decodeForTest decodes cluster znode data or fails the test.
func decodeForTest(t *testing.T, b []byte) clusterData {
	t.Helper()
	d, err := decodeCluster(b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return d
}

// meddlingConn is a ZooKeeper client whose Set of path first changes the
// znode through another session, the first `times` times: a concurrent
// writer that always wins the race.
type meddlingConn struct {
	zkconn.Conn
	path  string
	other *zk.Conn
	times int32
	sets  atomic.Int32
}

func (m *meddlingConn) Set(path string, data []byte, version int32) (*zk.Stat, error) {
	if path == m.path && m.sets.Add(1) <= m.times {
		b, _, err := m.other.Get(path)
		if err == nil {
			_, err = m.other.Set(path, b, -1)
		}
		if err != nil {
			return nil, err
		}
	}
	return m.Conn.Set(path, data, version)
}

// SetCluster retries a write that lost the race to another writer (read
// again, change again) and gives up after a bounded number of tries.
func TestIntegration_SetClusterRetriesAVersionConflict(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	raw := rawConn(t, srv, "")
	ctx := context.Background()
	if _, err := testAdmin(t, srv, "", 5*time.Second).CreateCluster(ctx, "c", ClusterSpec{Layout: snowflake.DefaultLayout()}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		meddle  int32
		wantErr string
		sets    int32
	}{
		{"two lost races", 2, "", 3},
		{"always lost", 1000, "kept changing", maxClusterRounds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m *meddlingConn
			dial := func(servers []string, opt zkconn.Options) (zkconn.Conn, error) {
				c, err := zkconn.Dial(servers, opt)
				if err != nil {
					return nil, err
				}
				m = &meddlingConn{Conn: c, path: "/snowflaked/c", other: raw, times: tc.meddle}
				return m, nil
			}
			_, before, _ := raw.Get("/snowflaked/c")
			want := 2*time.Hour + time.Duration(tc.meddle)*time.Minute
			res, err := testAdmin(t, srv, "", 5*time.Second, WithAdminDial(dial)).SetCluster(ctx, "c", ClusterChange{RecycleAfter: want})
			if m == nil {
				t.Fatal("SetCluster did not use the given dialer")
			}
			if got := m.sets.Load(); got != tc.sets {
				t.Errorf("SetCluster wrote %d times, want %d", got, tc.sets)
			}
			b, st, _ := raw.Get("/snowflaked/c")
			d := decodeForTest(t, b)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || msDuration(d.RecycleAfterMs) == want {
					t.Fatalf("SetCluster = %+v, %v (znode %s); want an error with %q and nothing written", res, err, b, tc.wantErr)
				}
				return
			}
			if err != nil || !res.Changed || msDuration(d.RecycleAfterMs) != want || st.Version != before.Version+tc.sets {
				t.Fatalf("SetCluster = %+v, %v; znode %s version %d (from %d); want %v written after %d lost races",
					res, err, b, st.Version, before.Version, want, tc.meddle)
			}
		})
	}
}

// SetCluster refuses what it cannot do, naming why, and writes nothing.
func TestIntegration_SetClusterRefusals(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	raw := rawConn(t, srv, "")
	ctx := context.Background()
	adm := testAdmin(t, srv, "", 5*time.Second)
	if _, err := adm.CreateCluster(ctx, "prod", ClusterSpec{Layout: snowflake.DefaultLayout()}); err != nil {
		t.Fatal(err)
	}
	layoutJSON := string(mustMarshal(t, snowflake.DefaultLayout()))
	for name, data := range map[string]string{
		"going":   `{"format":2,"requires":["deleting","tag_incarnation"],"layout":` + layoutJSON + `,"recycle_after_ms":3600000,"incarnation":{"id":"i"}}`,
		"future":  `{"format":2,"requires":["teleport"],"layout":` + layoutJSON + `,"recycle_after_ms":3600000,"incarnation":{"id":"i"}}`,
		"garbage": `not json`,
	} {
		if _, err := raw.Create("/snowflaked/"+name, []byte(data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, cluster string
		change        ClusterChange
		is            error
		want          []string
	}{
		{"no setting", "prod", ClusterChange{}, ErrInvalidConfig, []string{"no setting to change"}},
		{"below 1ms", "prod", ClusterChange{RecycleAfter: time.Microsecond}, ErrInvalidConfig, []string{"recycle-after 1µs is below 1ms"}},
		{"negative", "prod", ClusterChange{RecycleAfter: -time.Hour}, ErrInvalidConfig, []string{"below 1ms"}},
		{"missing cluster", "prdo", ClusterChange{RecycleAfter: time.Hour}, ErrNoCluster,
			[]string{`cluster "prdo" does not exist`, "the clusters there are future, garbage, going, prod", "did you mean prod?"}},
		{"being deleted", "going", ClusterChange{RecycleAfter: time.Hour}, ErrNoCluster,
			[]string{`cluster "going" is being deleted`, "snowflakectl cluster delete going --yes"}},
		{"unknown feature", "future", ClusterChange{RecycleAfter: time.Hour}, ErrUnknownFeature, []string{"teleport"}},
		{"malformed", "garbage", ClusterChange{RecycleAfter: time.Hour}, nil, []string{"holds data this release cannot use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, stBefore, _ := raw.Get("/snowflaked/" + tc.cluster)
			_, err := adm.SetCluster(ctx, tc.cluster, tc.change)
			if err == nil || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("SetCluster: %v, want an error wrapping %v", err, tc.is)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("SetCluster: %v, want it to contain %q", err, s)
				}
			}
			after, stAfter, _ := raw.Get("/snowflaked/" + tc.cluster)
			if string(after) != string(before) || (stBefore != nil && stAfter.Version != stBefore.Version) {
				t.Fatalf("a refused SetCluster changed the znode: %s → %s", before, after)
			}
		})
	}
	if ok, _ := exists(t, raw, "/snowflaked/prdo"); ok {
		t.Fatal("SetCluster of a missing cluster created it")
	}
}

// A node without --recycle-after follows the cluster's value as cluster
// set left it: its recycling scan frees worker IDs after the new, shorter
// value, not the one the cluster was created with. A node with another
// explicit value is refused, naming both and the way out.
func TestIntegration_NodeFollowsTheClustersRecycleAfter(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	cfgFor := func(key string, recycleAfter time.Duration) Config {
		cfg := testConfig(t, srv, key)
		cfg.Layout, cfg.RecycleAfter = smallLayout(), recycleAfter
		return cfg
	}
	// The cluster is created with an hour; four owners fill its space and
	// stop cleanly, reporting just now.
	for i := range 4 {
		c := newCoord(t, cfgFor("old-"+string(rune('a'+i)), time.Hour))
		mustClaim(t, c)
		if err := c.Close(ctx, 0); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	_, err := newCoord(t, cfgFor("follower", 0)).Claim(ctx, Prior{})
	if !errors.Is(err, errNoFreeWorkerID) || !strings.Contains(err.Error(), "4 more reported within the last 1h0m0s") {
		t.Fatalf("Claim without --recycle-after before cluster set: %v, want no free worker ID under the cluster's 1h", err)
	}
	const short = 100 * time.Millisecond
	setAt := time.Now()
	if res, err := testAdmin(t, srv, "", 5*time.Second).SetCluster(ctx, "test", ClusterChange{RecycleAfter: short}); err != nil || !res.Changed {
		t.Fatalf("SetCluster = %+v, %v", res, err)
	}
	_, err = newCoord(t, cfgFor("explicit", time.Hour)).Claim(ctx, Prior{})
	for _, s := range []string{"uses --recycle-after 100ms, this node is configured with 1h0m0s", "leave --recycle-after unset", "snowflakectl cluster set test"} {
		if !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), s) {
			t.Fatalf("Claim with an explicit other --recycle-after: %v, want ErrClusterMismatch with %q", err, s)
		}
	}
	deadline := time.Now().Add(waitLong)
	for attempt := 1; ; attempt++ {
		id, err := newCoord(t, cfgFor("follower", 0)).Claim(ctx, Prior{})
		if err == nil {
			if !id.Recycled || id.RecycleAfter != short {
				t.Fatalf("Claim = %+v; want a recycled worker ID under the cluster's %v", id, short)
			}
			if waited := time.Since(setAt); waited > waitLong/2 {
				t.Fatalf("the recycle came %v after cluster set, not after about %v", waited, short)
			}
			break
		}
		if !errors.Is(err, errNoFreeWorkerID) || !strings.Contains(err.Error(), "(recycle-after)") || time.Now().After(deadline) || attempt > 100 {
			t.Fatalf("Claim attempt %d without --recycle-after after cluster set: %v", attempt, err)
		}
		time.Sleep(short / 2)
	}
	// A node that sets the cluster's value explicitly joins as before.
	if id := mustClaim(t, newCoord(t, cfgFor("explicit-same", short))); !id.Recycled || id.RecycleAfter != short {
		t.Fatalf("Claim with --recycle-after equal to the cluster's = %+v", id)
	}
}

// A recycle_after_ms too large for a time.Duration is refused when the
// cluster znode is read, never wrapped into a negative duration (which
// would make every worker ID without a lease free at once).
func TestDecodeClusterRefusesRecycleAfterBeyondADuration(t *testing.T) {
	for _, tc := range []struct {
		ms     int64
		wantOK bool
	}{
		{maxRecycleAfterMs, true},
		{maxRecycleAfterMs + 1, false},
		{math.MaxInt64, false},
	} {
		d := newClusterData(snowflake.DefaultLayout(), WorkerRange{0, 511}, time.Hour)
		d.RecycleAfterMs = tc.ms
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		d, err = decodeCluster(b)
		if (err == nil) != tc.wantOK {
			t.Errorf("recycle_after_ms %d: error %v, want ok %v", tc.ms, err, tc.wantOK)
		}
		if err == nil && msDuration(d.RecycleAfterMs) <= 0 {
			t.Errorf("recycle_after_ms %d decodes to %v", tc.ms, msDuration(d.RecycleAfterMs))
		}
	}
}
