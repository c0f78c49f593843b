package coordinator

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// segmentStore opens a SegmentStore on a cluster a node has created.
func segmentStore(t *testing.T, servers []string) *SegmentStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := OpenSegments(ctx, SegmentConfig{Servers: servers, Cluster: "test", Timeout: 3 * time.Second, Log: testLog(t, nil)})
	if err != nil {
		t.Fatalf("OpenSegments: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func newSegmentCluster(t *testing.T) []string {
	t.Helper()
	srv := serversOf(zkharness.StartStandalone(t))
	mustClaim(t, newCoord(t, testConfig(t, srv, "seg-node")))
	return srv
}

// Goroutines racing the compare-and-set on max_id through separate
// sessions each get disjoint ranges, and max_id accounts for all of them.
func TestSegmentStore_RacingAllocators(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	admin := segmentStore(t, srv)
	if err := admin.Create(ctx, segment.Tag{Name: "race", Start: 100, Step: 10, MaxStep: 1000}); err != nil {
		t.Fatal(err)
	}
	const allocators, each = 6, 40
	var mu sync.Mutex
	var got []segment.Range
	var wg sync.WaitGroup
	for range allocators {
		st := segmentStore(t, srv) // a session each: real races at the server
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, _, err := st.Alloc(ctx, "race", int64(1+i%5), 0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(got, func(a, b segment.Range) int { return cmp.Compare(a.Lo, b.Lo) })
	var total int64
	for i, r := range got {
		total += r.Len()
		if i > 0 && r.Lo < got[i-1].Hi {
			t.Fatalf("ranges %v and %v overlap", got[i-1], r)
		}
	}
	tag, err := admin.Tag(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != allocators*each || tag.MaxID != 100+total || got[0].Lo != 100 {
		t.Fatalf("%d ranges, %d IDs, max_id %d: want %d ranges from 100 with max_id = 100 + IDs", len(got), total, tag.MaxID, allocators*each)
	}
}

// Returned ranges are taken lowest first (at or above the caller's floor),
// each by exactly one of the allocators racing for them, before max_id
// moves.
func TestSegmentStore_ReturnedRangesLowestFirstOnce(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	st := segmentStore(t, srv)
	if err := st.Create(ctx, segment.Tag{Name: "ret", Start: 1, Step: 100, MaxStep: 100}); err != nil {
		t.Fatal(err)
	}
	var first []segment.Range
	for range 3 {
		r, _, err := st.Alloc(ctx, "ret", 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, r)
	}
	for _, i := range []int{2, 0, 1} { // returned out of order
		if err := st.Return(ctx, "ret", segment.Range{Lo: first[i].Lo + 50, Hi: first[i].Hi}); err != nil {
			t.Fatal(err)
		}
	}
	if r, _, err := st.Alloc(ctx, "ret", 100, 200); err != nil || r != (segment.Range{Lo: 251, Hi: 301}) {
		t.Fatalf("alloc above 200: %v %v, want the returned [251,301)", r, err)
	}
	if r, _, err := st.Alloc(ctx, "ret", 100, 0); err != nil || r != (segment.Range{Lo: 51, Hi: 101}) {
		t.Fatalf("alloc: %v %v, want the lowest returned [51,101)", r, err)
	}
	results := make(chan segment.Range, 4)
	var wg sync.WaitGroup
	for range 4 {
		other := segmentStore(t, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _, err := other.Alloc(ctx, "ret", 100, 0)
			if err != nil {
				t.Error(err)
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	var los []int64
	for r := range results {
		los = append(los, r.Lo)
	}
	slices.Sort(los)
	if want := []int64{151, 301, 401, 501}; !slices.Equal(los, want) {
		t.Fatalf("4 racing allocators got ranges starting at %v, want %v (the returned one once, then fresh ones)", los, want)
	}
}

// Tag records: create once, validation, unknown tags, holders, the
// cluster's incarnation.
func TestSegmentStore_Tags(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	st := segmentStore(t, srv)
	if err := st.Create(ctx, segment.Tag{Name: "a", Start: 10, Step: 5, MaxStep: 50, Description: "accounts"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tag  segment.Tag
		want error
	}{
		{segment.Tag{Name: "a", Start: 1, Step: 1, MaxStep: 1}, segment.ErrTagExists},
		{segment.Tag{Name: "a/b", Start: 1, Step: 1, MaxStep: 1}, segment.ErrInvalidTag},
	} {
		if err := st.Create(ctx, tc.tag); !errors.Is(err, tc.want) {
			t.Errorf("create %+v: %v, want %v", tc.tag, err, tc.want)
		}
	}
	if err := st.Create(ctx, segment.Tag{Name: "b", Start: 1, Step: 10, MaxStep: 5}); err == nil {
		t.Error("max step below step accepted")
	}
	if _, _, err := st.Alloc(ctx, "missing", 1, 0); !errors.Is(err, segment.ErrUnknownTag) {
		t.Errorf("alloc of a missing tag: %v", err)
	}
	tags, err := st.List(ctx)
	if err != nil || len(tags) != 1 || tags[0].Name != "a" || tags[0].Description != "accounts" || tags[0].MaxID != 10 {
		t.Fatalf("list: %+v %v", tags, err)
	}
	held := []segment.Range{{Lo: 10, Hi: 15}}
	if err := st.Publish(ctx, "a", "node:1", held); err != nil {
		t.Fatal(err)
	}
	if h, err := st.Holders(ctx, "a"); err != nil || !slices.Equal(h["node:1"], held) {
		t.Fatalf("holders: %v %v", h, err)
	}
	if err := st.Publish(ctx, "a", "node:1", nil); err != nil {
		t.Fatal(err)
	}
	if h, err := st.Holders(ctx, "a"); err != nil || len(h) != 0 {
		t.Fatalf("holders after clearing: %v %v", h, err)
	}
	if inc, err := st.Incarnation(ctx); err != nil || len(inc) < 16 {
		t.Fatalf("incarnation %q %v", inc, err)
	}
}
