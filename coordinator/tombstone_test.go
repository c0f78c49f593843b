package coordinator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// TestOverTombstone: a cluster created over a tombstone starts after its
// fence, and settings under which an old ID could come back are refused,
// naming the old value and the flag that accepts them.
func TestOverTombstone(t *testing.T) {
	old := snowflake.DefaultLayout()
	const fence = snowflake.UnixMilli(1_800_000_000_000)
	tomb := Tombstone{Cluster: "c", Fence: fence, Layout: old, WorkerIDs: "0-1023", Deleted: fence}
	with := func(f func(*snowflake.Layout)) snowflake.Layout {
		l := old
		f(&l)
		return l
	}
	for _, tc := range []struct {
		name   string
		layout snowflake.Layout
		refuse string // "" for accepted
	}{
		{"same settings", old, ""},
		{"earlier epoch", with(func(l *snowflake.Layout) { l.Epoch = l.Epoch.Add(-time.Hour) }), ""},
		{"worker and sequence bits traded", with(func(l *snowflake.Layout) { l.WorkerBits, l.SequenceBits = 12, 10 }), ""},
		{"gene bits", with(func(l *snowflake.Layout) { l.GeneBits = 2 }), ""},
		{"later epoch", with(func(l *snowflake.Layout) { l.Epoch = l.Epoch.Add(20 * time.Second) }), "--epoch 2024-01-01T00:00:00Z, asked for the later"},
		{"other time unit", with(func(l *snowflake.Layout) { l.Unit = 10 * time.Millisecond }), "--time-unit 1ms, asked for 10ms"},
		{"time field moved", with(func(l *snowflake.Layout) { l.TimeBits, l.WorkerBits = 40, 11 }), "layout 41/10/12"},
		{"time field shorter", with(func(l *snowflake.Layout) { l.TimeBits = 39 }), "layout 41/10/12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := newClusterData(tc.layout, WorkerRange{}, time.Hour)
			got, err := overTombstone("c", want, tomb)
			if tc.refuse != "" {
				if !errors.Is(err, ErrTombstone) || !errors.Is(err, ErrClusterMismatch) || !strings.Contains(err.Error(), tc.refuse) ||
					!strings.Contains(err.Error(), "--ignore-tombstone") || !strings.Contains(err.Error(), "cluster purge c") {
					t.Fatalf("overTombstone: %v; want ErrTombstone naming %q and the ways out", err, tc.refuse)
				}
				return
			}
			if err != nil {
				t.Fatalf("overTombstone: %v", err)
			}
			if got.FenceFloor != snowflake.UnixMilli(fence) || !slices.Contains(got.Requires, featureFenceFloor) {
				t.Fatalf("cluster over the tombstone: floor %d, requires %v; want %d and %s", got.FenceFloor, got.Requires, fence, featureFenceFloor)
			}
			d, err := decodeCluster(mustMarshal(t, got))
			if err != nil || d.FenceFloor != snowflake.UnixMilli(fence) {
				t.Fatalf("decoded back: floor %d, %v", d.FenceFloor, err)
			}
		})
	}
}

// TestFenceFloorWithoutTheFeatureIsRefused: a floor written by hand
// without the feature that keeps older releases out is refused, not used
// by this release while an older one ignores it.
func TestFenceFloorWithoutTheFeatureIsRefused(t *testing.T) {
	b := []byte(`{"format":2,"requires":["tag_incarnation"],"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"},"fence_floor_ms":5,"incarnation":{"id":"x"}}`)
	if _, err := decodeCluster(b); err == nil || !strings.Contains(err.Error(), "fence_floor") {
		t.Fatalf("decodeCluster: %v; want a refusal naming fence_floor", err)
	}
}

// holdTagRanges makes tag t of cluster name, with a node holding ranges
// of it (an ephemeral holder znode of raw's session, whose path it
// returns).
func holdTagRanges(t *testing.T, raw *zk.Conn, name string) string {
	t.Helper()
	base := "/snowflaked/" + name + "/segments"
	for _, p := range []string{base, base + "/t", base + "/t/holders"} {
		data := []byte(nil)
		if p == base+"/t" {
			data = []byte(`{"max_id":7001,"start":1,"step":1000,"max_step":10000}`)
		}
		if _, err := raw.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := raw.Create(base+"/t/holders/node-x", []byte(`{"held":[{"Lo":6001,"Hi":7001}]}`), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	return holder
}

// checkTombstones checks the tombstone of cluster name (its fence) and
// of its tag t (its max_id).
func checkTombstones(t *testing.T, raw *zk.Conn, name string, fence, maxID int64) {
	t.Helper()
	ctx := context.Background()
	tomb, ok, _, err := readTombstone(ctx, zkclient.Client{Conn: raw, Timeout: 5 * time.Second}, name)
	if err != nil || !ok || tomb.Fence != snowflake.UnixMilli(fence) {
		t.Fatalf("tombstone %+v, %v, %v; want fence %d", tomb, ok, err, fence)
	}
	tt, ok, _, err := zkclient.ReadTagTombstone(ctx, zkclient.Client{Conn: raw, Timeout: 5 * time.Second}, name, "t")
	if err != nil || !ok || tt.MaxID != maxID {
		t.Fatalf("tag tombstone %+v, %v, %v; want max_id %d", tt, ok, err, maxID)
	}
}

// TestIntegration_ClusterTombstone: a deleted cluster leaves a tombstone
// with its highest fence and its tags' max_ids; a cluster created again
// (by snowflakectl cluster create, and by a node's --create-cluster)
// starts every claim after it, with a fresh forever znode and a recycled
// worker ID alike; purge forgets it. Delete is refused while a node holds
// ranges of a tag, naming it.
func TestIntegration_ClusterTombstone(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	raw := rawConn(t, srv, "")
	for _, viaNode := range []bool{false, true} {
		name := "tomb"
		if viaNode {
			name = "tomb-node"
		}
		spec := ClusterSpec{Layout: snowflake.DefaultLayout(), RecycleAfter: time.Hour}
		if _, err := testAdmin(t, srv, "", 5*time.Second).CreateCluster(ctx, name, spec); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, srv, "tomb-a")
		cfg.Cluster, cfg.CreateCluster = name, false
		c := newCoord(t, cfg)
		id := mustClaim(t, c)
		if err := c.Close(ctx, 0); err != nil {
			t.Fatal(err)
		}
		// A fence an hour ahead, passed by hand later: the tombstone must
		// carry the highest fence of any worker.
		d, st := readForeverData(t, raw, id.Path)
		ahead := time.Now().Add(time.Hour).UnixMilli()
		d.Fence = snowflake.UnixMilliOf(time.Now().Add(-time.Minute))
		d.PrevFence = snowflake.UnixMilli(ahead) // a fence a holder before it promised
		if _, err := raw.Set(id.Path, mustMarshal(t, d), st.Version); err != nil {
			t.Fatal(err)
		}
		// A node holds ranges of tag t: refused, naming it.
		holder := holdTagRanges(t, raw, name)
		err := testAdmin(t, srv, "", 5*time.Second).DeleteCluster(ctx, name)
		if !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "tag t: node node-x (ranges [6001,7001))") {
			t.Fatalf("DeleteCluster while a node holds ranges: %v; want ErrLeaseHeld naming it", err)
		}
		if err := raw.Delete(holder, -1); err != nil {
			t.Fatal(err)
		}
		if err := testAdmin(t, srv, "", 5*time.Second).DeleteCluster(ctx, name); err != nil {
			t.Fatalf("DeleteCluster: %v", err)
		}
		checkTombstones(t, raw, name, ahead, 7001)

		cfg = testConfig(t, srv, "tomb-b")
		cfg.Cluster = name
		if viaNode {
			cfg.CreateCluster = true
		} else if res, err := testAdmin(t, srv, "", 5*time.Second).CreateCluster(ctx, name, spec); err != nil || res.FenceFloor.UnixMilli() != ahead {
			t.Fatalf("CreateCluster over the tombstone = %+v, %v; want the floor %d", res, err, ahead)
		}
		nid := mustClaim(t, newCoord(t, cfg))
		if nid.PrevFence != snowflake.UnixMilli(ahead) {
			t.Fatalf("the first claim of the cluster created again starts after %d, want the tombstone's fence %d", nid.PrevFence, ahead)
		}
		fd, _ := readForeverData(t, raw, nid.Path)
		if fd.PrevFence != snowflake.UnixMilli(ahead) || fd.Fence < snowflake.UnixMilli(ahead) {
			t.Fatalf("the forever znode of the cluster created again: prev_fence %d, fence %d; want %d and at least it", fd.PrevFence, fd.Fence, ahead)
		}
	}
	res, err := testAdmin(t, srv, "", 5*time.Second).PurgeTombstone(ctx, "tomb")
	if err != nil || !res.Cluster || !slices.Equal(res.Tags, []string{"t"}) {
		t.Fatalf("PurgeTombstone = %+v, %v", res, err)
	}
	if _, err := testAdmin(t, srv, "", 5*time.Second).PurgeTombstone(ctx, "tomb"); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("PurgeTombstone again: %v, want ErrNoCluster", err)
	}
}

// TestIntegration_FlatClusterIsDeletedWithATombstone: a cluster znode of
// the flat shape (written by a release before the features list), nested
// by the delete's mark alone, still gives its tombstone its layout.
func TestIntegration_FlatClusterIsDeletedWithATombstone(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	raw := rawConn(t, srv, "")
	flat := mustMarshal(t, clusterData{Layout: snowflake.DefaultLayout(), Incarnation: "x", RecycleAfterMs: 1000})
	if strings.Contains(string(flat), "requires") {
		t.Fatalf("not the flat shape: %s", flat)
	}
	for _, p := range []string{"/snowflaked", "/snowflaked/flat", "/snowflaked/flat/forever", "/snowflaked/flat/leases", "/snowflaked/flat/alive"} {
		data := []byte(nil)
		if p == "/snowflaked/flat" {
			data = flat
		}
		if _, err := raw.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if err := testAdmin(t, srv, "", 5*time.Second).DeleteCluster(ctx, "flat"); err != nil {
		t.Fatalf("DeleteCluster of a flat cluster: %v", err)
	}
	tomb, ok, _, err := readTombstone(ctx, zkclient.Client{Conn: raw, Timeout: 5 * time.Second}, "flat")
	if err != nil || !ok || !tomb.Layout.Equal(snowflake.DefaultLayout()) {
		t.Fatalf("tombstone %+v, %v, %v", tomb, ok, err)
	}
}

// TestIntegration_TombstoneGuard: a create that read no tombstone, or one
// at a version, fails when a delete buried the name since, so it reads the
// tombstone again; nothing of it lands.
func TestIntegration_TombstoneGuard(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	raw := rawConn(t, srv, "")
	z := zkclient.Client{Conn: raw, Timeout: 5 * time.Second}
	open := zk.WorldACL(zk.PermAll)
	if err := z.Ensure(ctx, zkclient.TombstoneRoot, nil, open); err != nil {
		t.Fatal(err)
	}
	path := zkclient.TombstonePath("g")
	create := func(version int32) (int, error) {
		ops := append([]any{&zk.CreateRequest{Path: "/guarded", Acl: open}}, zkclient.TombstoneGuard(path, version, open)...)
		failed, err := z.Multi(ctx, ops...)
		if err == nil {
			if err := raw.Delete("/guarded", -1); err != nil {
				t.Fatal(err)
			}
		}
		return failed, err
	}
	if _, err := create(-1); err != nil {
		t.Fatalf("no tombstone, none read: %v", err)
	}
	if _, err := raw.Create(path, []byte(`{}`), 0, open); err != nil {
		t.Fatal(err)
	}
	if failed, err := create(-1); err == nil || failed < 1 {
		t.Fatalf("a tombstone written since none was read: failed op %d, %v; want the guard to fail", failed, err)
	}
	if _, err := create(0); err != nil {
		t.Fatalf("the tombstone read at its version: %v", err)
	}
	if _, err := raw.Set(path, []byte(`{"fence_ms":1}`), 0); err != nil {
		t.Fatal(err)
	}
	if failed, err := create(0); err == nil || failed < 1 {
		t.Fatalf("a tombstone rewritten since it was read: failed op %d, %v; want the guard to fail", failed, err)
	}
	if ok, _, _ := raw.Exists("/guarded"); ok {
		t.Fatal("a failed guard let the create land")
	}
}

// TestIntegration_OpenTombstoneIsRefused: under --zk-auth, a tombstone
// znode that anyone may change (created first by a client without the
// credentials) is neither written into by a delete nor trusted by a create.
func TestIntegration_OpenTombstoneIsRefused(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	const auth = "snow:s3cret"
	anyone := rawConn(t, srv, "")
	if _, err := anyone.Create(zkclient.TombstoneRoot, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := anyone.Create(zkclient.TombstonePath("sealed"), []byte(`{"cluster":"sealed","fence_ms":0,"layout":{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}}`), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	spec := ClusterSpec{Layout: snowflake.DefaultLayout(), RecycleAfter: time.Hour}
	if _, err := testAdmin(t, srv, auth, 5*time.Second).CreateCluster(ctx, "sealed", spec); !errors.Is(err, zkclient.ErrOpenTombstone) {
		t.Fatalf("CreateCluster over an open tombstone: %v; want ErrOpenTombstone", err)
	}
	if _, err := testAdmin(t, srv, auth, 5*time.Second).CreateCluster(ctx, "sealed", ClusterSpec{Layout: spec.Layout, RecycleAfter: time.Hour, IgnoreTombstone: true}); !errors.Is(err, zkclient.ErrOpenTombstone) {
		t.Fatalf("CreateCluster over an open tombstone, ignoring it: %v; want ErrOpenTombstone all the same", err)
	}
	if _, err := testAdmin(t, srv, auth, 5*time.Second).CreateCluster(ctx, "other", spec); err != nil {
		t.Fatalf("CreateCluster of another name: %v", err)
	}
	// The cluster's tombstone znodes exist from its creation, guarded by
	// its ACL and never empty: an open root lets nobody delete them.
	if err := anyone.Delete(zkclient.TombstonePath("other"), -1); !errors.Is(err, zk.ErrNotEmpty) && !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("delete of a cluster's tombstone znode by anyone: %v; want it refused", err)
	}
	// As an older release left it: no tombstone znodes; then squatted.
	owner := rawConn(t, srv, auth)
	for _, p := range []string{zkclient.TagTombstonesPath("other"), zkclient.TombstonePath("other")} {
		if err := owner.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := anyone.Create(zkclient.TombstonePath("other"), nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	before, _, err := owner.Get("/snowflaked/other")
	if err != nil {
		t.Fatal(err)
	}
	if err := testAdmin(t, srv, auth, 5*time.Second).DeleteCluster(ctx, "other"); !errors.Is(err, zkclient.ErrOpenTombstone) {
		t.Fatalf("DeleteCluster into an open tombstone: %v; want ErrOpenTombstone", err)
	}
	if after, _, err := owner.Get("/snowflaked/other"); err != nil || string(after) != string(before) {
		t.Fatalf("a delete refused for its tombstone touched the cluster: %s, %v; want %s", after, err, before)
	}
}

// TestIntegration_TombstonesOfTwoCredentials: clusters with credentials of
// their own share the tombstones' root: each creates, deletes and creates
// again its own, whoever created the root.
func TestIntegration_TombstonesOfTwoCredentials(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	spec := ClusterSpec{Layout: snowflake.DefaultLayout(), RecycleAfter: time.Hour}
	for _, c := range []struct{ name, auth string }{{"a", "alice:a"}, {"b", "bob:b"}} {
		if _, err := testAdmin(t, srv, c.auth, 5*time.Second).CreateCluster(ctx, c.name, spec); err != nil {
			t.Fatalf("CreateCluster %s with %s: %v", c.name, c.auth, err)
		}
	}
	if err := testAdmin(t, srv, "bob:b", 5*time.Second).DeleteCluster(ctx, "b"); err != nil {
		t.Fatalf("DeleteCluster b: %v", err)
	}
	if _, err := testAdmin(t, srv, "bob:b", 5*time.Second).CreateCluster(ctx, "b", spec); err != nil {
		t.Fatalf("CreateCluster b again: %v", err)
	}
	if err := testAdmin(t, srv, "carol:c", 5*time.Second).DeleteCluster(ctx, "b"); !errors.Is(err, zkclient.ErrForeignTombstone) && !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("DeleteCluster b with other credentials: %v; want a refusal naming the credentials", err)
	}
	if _, err := testAdmin(t, srv, "bob:b", 5*time.Second).PurgeTombstone(ctx, "b"); err != nil {
		t.Fatalf("PurgeTombstone b with its own credentials: %v", err)
	}
}
