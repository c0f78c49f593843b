package segment

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// memCluster is an in-memory ZooKeeper (internal/zkconn/zkmem, which can forget
// acknowledged writes: Snapshot, Restore) with a cluster "test" in it.
func memCluster(t *testing.T) *zkmem.Server {
	t.Helper()
	srv := zkmem.New()
	admin := srv.Connect(zkconn.Options{SessionTimeout: 10 * time.Second})
	t.Cleanup(admin.Close)
	cluster, err := json.Marshal(snowflake.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	cluster = append(cluster[:len(cluster)-1], `,"incarnation":"mem"}`...)
	for _, n := range []struct {
		path string
		data []byte
	}{{"/snowflaked", nil}, {"/snowflaked/test", cluster}} {
		if _, err := admin.Create(n.path, n.data, zk.FlagPersistent, nil); err != nil {
			t.Fatalf("create %s: %v", n.path, err)
		}
	}
	return srv
}

// memZKStore opens a ZKStore on srv's cluster.
func memZKStore(t *testing.T, srv *zkmem.Server) *ZKStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := OpenZK(ctx, ZKConfig{Servers: []string{"127.0.0.1:2181"}, Cluster: "test", Timeout: 3 * time.Second,
		Log: testsupport.Log(t, nil), Dial: srv.Dial})
	if err != nil {
		t.Fatalf("OpenZK: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// A store refuses a record that went back whatever ZooKeeper forgot: an
// allocation (max_id went back), a take of a returned range (the range is
// back in returned/ while the store holds it; max_id is as it was) or a
// return (the same). It never hands out a range again, and the operator's
// set-max above the max_id it saw lets it go on.
func TestSegmentStore_ForgottenWriteIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget func(t *testing.T, ctx context.Context, s *ZKStore, inc int64) // what ZooKeeper forgets
	}{
		{"alloc", func(t *testing.T, ctx context.Context, s *ZKStore, inc int64) {
			if _, _, err := s.Alloc(ctx, "back", inc, 100, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"take", func(t *testing.T, ctx context.Context, s *ZKStore, inc int64) {
			if r, _, err := s.Alloc(ctx, "back", inc, 100, 0); err != nil || r != (Range{Lo: 1, Hi: 101}) {
				t.Fatalf("take the returned [1,101): %v, %v", r, err)
			}
		}},
		{"return", func(t *testing.T, ctx context.Context, s *ZKStore, inc int64) {
			if err := s.Return(ctx, "back", inc, Range{Lo: 1, Hi: 101}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := memCluster(t)
			ctx := context.Background()
			s, admin := memZKStore(t, srv), memZKStore(t, srv)
			if err := admin.Create(ctx, Tag{Name: "back", Start: 1, Step: 100, MaxStep: 100}); err != nil {
				t.Fatal(err)
			}
			inc := incOf(t, s, "back")
			first, _, err := s.Alloc(ctx, "back", inc, 100, 0) // [1,101)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "take" {
				if err := s.Return(ctx, "back", inc, first); err != nil {
					t.Fatal(err)
				}
			}
			snap := srv.Snapshot()
			tc.forget(t, ctx, s, inc)
			srv.Restore(snap)

			// The connection breaks for the election: poll until ZooKeeper
			// answers, then the store must refuse, and hand out nothing.
			deadline := time.Now().Add(waitLong)
			for {
				r, _, err := s.Alloc(ctx, "back", inc, 100, 0)
				if errors.Is(err, ErrWentBack) {
					break
				}
				if err == nil || !errors.Is(err, zkclient.ErrUnavailable) || time.Now().After(deadline) {
					t.Fatalf("Alloc after ZooKeeper forgot a %s: %v, %v; want ErrWentBack and no range", tc.name, r, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := s.Return(ctx, "back", inc, Range{Lo: 500, Hi: 600}); !errors.Is(err, ErrWentBack) {
				t.Fatalf("Return after ZooKeeper forgot a %s: %v, want ErrWentBack", tc.name, err)
			}
			seen, err := admin.Tag(ctx, "back")
			if err != nil {
				t.Fatal(err)
			}
			// The operator's repair (the runbook: set-max --drop-returned)
			// drops the returned ranges (a forgotten take put back the one
			// its taker holds) and raises max_id above the one the store
			// saw: the store, and a store that saw nothing, go on above it
			// and never hand out a dropped range.
			was, dropped, err := admin.Repair(ctx, "back", 202)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "take" && !slices.Equal(dropped, []Range{{Lo: 1, Hi: 101}}) {
				t.Fatalf("Repair after a forgotten take dropped %v, want the range put back, [1,101)", dropped)
			}
			if left, err := admin.Returned(ctx, "back"); err != nil || len(left) != 0 {
				t.Fatalf("returned ranges after the repair: %v, %v; want none", left, err)
			}
			fresh := memZKStore(t, srv)
			for _, st := range []*ZKStore{s, fresh} {
				if r, _, err := st.Alloc(ctx, "back", inc, 100, 0); err != nil || r.Lo < 202 {
					t.Fatalf("Alloc after the repair from %d (read %d) to 202: %v, %v; want a range from 202", was, seen.MaxID, r, err)
				}
			}
		})
	}
}

// A take of a returned range writes the tag record on a real ZooKeeper:
// its version grows by one, max_id and every other field (one of another
// release's too) stay as they were, and a second take of the range finds
// it gone.
func TestSegmentStore_TakeWritesTheRecord(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s, other := segmentStore(t, srv), segmentStore(t, srv)
	if err := s.Create(ctx, Tag{Name: "took", Start: 1, Step: 100, MaxStep: 100}); err != nil {
		t.Fatal(err)
	}
	inc := incOf(t, s, "took")
	r, _, err := s.Alloc(ctx, "took", inc, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Return(ctx, "took", inc, r); err != nil {
		t.Fatal(err)
	}
	b, st, err := s.z.Get(ctx, s.tagPath("took"))
	if err != nil {
		t.Fatal(err)
	}
	b = append(b[:len(b)-1], `,"future_field":7}`...) // a field of another release
	if st, err = s.z.Set(ctx, s.tagPath("took"), b, st.Version); err != nil {
		t.Fatal(err)
	}
	got, _, err := other.Alloc(ctx, "took", inc, 100, 0)
	if err != nil || got != r {
		t.Fatalf("take: %v, %v; want the returned %v", got, err, r)
	}
	after, st2, err := s.z.Get(ctx, s.tagPath("took"))
	if err != nil {
		t.Fatal(err)
	}
	var was, now map[string]json.RawMessage
	if err := json.Unmarshal(b, &was); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(after, &now); err != nil {
		t.Fatal(err)
	}
	if st2.Version != st.Version+1 || string(now["max_id"]) != string(was["max_id"]) || string(now["future_field"]) != "7" {
		t.Fatalf("after the take: version %d (was %d), record %s (was %s); want the version one up, the record as it was",
			st2.Version, st.Version, after, b)
	}
	if left, err := s.Returned(ctx, "took"); err != nil || len(left) != 0 {
		t.Fatalf("returned after the take: %v, %v; want none", left, err)
	}
	if again, _, err := s.Alloc(ctx, "took", inc, 100, 0); err != nil || again == r {
		t.Fatalf("an allocation after the take: %v, %v; want a new range", again, err)
	}
}

// The poll of a served tag reads its record (R6): a store that only polled
// the tag since another store allocated refuses once ZooKeeper forgets that
// allocation, instead of handing out the same range again. Virtual time
// (testing/synctest): the poll runs every half second.
func TestSegmentStore_PollSeesOthersWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := memCluster(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, admin := memZKStore(t, srv), memZKStore(t, srv)
		if err := admin.Create(ctx, Tag{Name: "back", Start: 1, Step: 100, MaxStep: 100}); err != nil {
			t.Fatal(err)
		}
		inc := incOf(t, s, "back")
		if _, err := s.WatchTag(ctx, "back", inc); err != nil {
			t.Fatal(err)
		}
		snap := srv.Snapshot()
		theirs, _, err := admin.Alloc(ctx, "back", inc, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * tagPoll) // s polls the record at least once
		srv.Restore(snap)
		time.Sleep(time.Second) // the connections come back after the election
		r, _, err := s.Alloc(ctx, "back", inc, 100, 0)
		if !errors.Is(err, ErrWentBack) {
			t.Fatalf("Alloc after ZooKeeper forgot another store's allocation of %v: %v, %v; want ErrWentBack and no range", theirs, r, err)
		}
	})
}
