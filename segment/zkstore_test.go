package segment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// segmentStore opens a ZKStore on a cluster a node has created.
func segmentStore(t *testing.T, servers []string) *ZKStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	s, err := OpenZK(ctx, ZKConfig{Servers: servers, Cluster: "test", Timeout: 3 * time.Second, Log: testsupport.Log(t, nil)})
	if err != nil {
		t.Fatalf("OpenZK: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// waitLong bounds a test's waits on ZooKeeper.
const waitLong = 15 * time.Second

// newSegmentCluster starts a ZooKeeper and has a node (a coordinator's
// claim) create the cluster "test" in it, as a running node would.
func newSegmentCluster(t *testing.T) []string {
	t.Helper()
	srv := strings.Split(zkharness.StartStandalone(t).ConnectString(), ",")
	c, err := coordinator.New(coordinator.Config{
		Servers: srv, Cluster: "test", NodeKey: "seg-node", Advertise: "127.0.0.1:10001", CreateCluster: true,
		Layout: snowflake.DefaultLayout(), SessionTimeout: 4 * time.Second, RecycleAfter: time.Hour,
		ReportInterval: 100 * time.Millisecond, ZKFenceAhead: 600 * time.Millisecond,
		ConnectTimeout: 3 * time.Second, Log: testsupport.Log(t, nil),
	})
	if err != nil {
		t.Fatalf("coordinator.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = c.Close(ctx, 0)
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := c.Claim(ctx, coordinator.Prior{}); err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return srv
}

// Goroutines racing the compare-and-set on max_id through separate
// sessions each get disjoint ranges, and max_id accounts for all of them.
func TestSegmentStore_RacingAllocators(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	admin := segmentStore(t, srv)
	if err := admin.Create(ctx, Tag{Name: "race", Start: 100, Step: 10, MaxStep: 1000}); err != nil {
		t.Fatal(err)
	}
	const allocators, each = 6, 40
	var mu sync.Mutex
	var got []Range
	var wg sync.WaitGroup
	for range allocators {
		st := segmentStore(t, srv) // a session each: real races at the server
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r, _, err := st.Alloc(ctx, "race", incOf(t, st, "race"), int64(1+i%5), 0)
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
	slices.SortFunc(got, func(a, b Range) int { return cmp.Compare(a.Lo, b.Lo) })
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
	if err := st.Create(ctx, Tag{Name: "ret", Start: 1, Step: 100, MaxStep: 100}); err != nil {
		t.Fatal(err)
	}
	var first []Range
	for range 3 {
		r, _, err := st.Alloc(ctx, "ret", incOf(t, st, "ret"), 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, r)
	}
	for _, i := range []int{2, 0, 1} { // returned out of order
		if err := st.Return(ctx, "ret", incOf(t, st, "ret"), Range{Lo: first[i].Lo + 50, Hi: first[i].Hi}); err != nil {
			t.Fatal(err)
		}
	}
	if r, _, err := st.Alloc(ctx, "ret", incOf(t, st, "ret"), 100, 200); err != nil || r != (Range{Lo: 251, Hi: 301}) {
		t.Fatalf("alloc above 200: %v %v, want the returned [251,301)", r, err)
	}
	if r, _, err := st.Alloc(ctx, "ret", incOf(t, st, "ret"), 100, 0); err != nil || r != (Range{Lo: 51, Hi: 101}) {
		t.Fatalf("alloc: %v %v, want the lowest returned [51,101)", r, err)
	}
	results := make(chan Range, 4)
	var wg sync.WaitGroup
	for range 4 {
		other := segmentStore(t, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _, err := other.Alloc(ctx, "ret", incOf(t, other, "ret"), 100, 0)
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
	if err := st.Create(ctx, Tag{Name: "a", Start: 10, Step: 5, MaxStep: 50, Description: "accounts"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tag  Tag
		want error
	}{
		{Tag{Name: "a", Start: 1, Step: 1, MaxStep: 1}, errTagExists},
		{Tag{Name: "a/b", Start: 1, Step: 1, MaxStep: 1}, ErrInvalidTag},
	} {
		if err := st.Create(ctx, tc.tag); !errors.Is(err, tc.want) {
			t.Errorf("create %+v: %v, want %v", tc.tag, err, tc.want)
		}
	}
	if err := st.Create(ctx, Tag{Name: "b", Start: 1, Step: 10, MaxStep: 5}); err == nil {
		t.Error("max step below step accepted")
	}
	if _, _, err := st.Alloc(ctx, "missing", 1, 1, 0); !errors.Is(err, ErrUnknownTag) {
		t.Errorf("alloc of a missing tag: %v", err)
	}
	tags, err := st.List(ctx)
	if err != nil || len(tags) != 1 || tags[0].Name != "a" || tags[0].Description != "accounts" || tags[0].MaxID != 10 {
		t.Fatalf("list: %+v %v", tags, err)
	}
	held := []Range{{Lo: 10, Hi: 15}}
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

// returnOutcome reads a lost return's fate from the tag record: its nonce
// at its place applied; another nonce there, or a record moved past its
// version with the count where it was, not; not yet recorded at or below its
// version, it may still land; fallen out of the window of nonces, or the
// count gone back, unknown. A tag's first return cannot be told from one
// whose fields a rewrite dropped: unknown.
func TestReturnOutcome(t *testing.T) {
	rec := tagRecord{ReturnSeq: 40, Returns: []string{"n38", "n39", "n40"}}
	for _, tc := range []struct {
		name    string
		version int32
		p       pendingReturn
		want    int
	}{
		{"its nonce, last", 7, pendingReturn{seq: 40, nonce: "n40", version: 6}, returnApplied},
		{"its nonce, two returns since", 7, pendingReturn{seq: 38, nonce: "n38", version: 3}, returnApplied},
		{"another nonce at its place", 7, pendingReturn{seq: 39, nonce: "mine", version: 5}, returnNot},
		{"not recorded, the record at its version", 7, pendingReturn{seq: 41, nonce: "mine", version: 7}, returnMayApply},
		{"not recorded, a read that lags behind its version", 6, pendingReturn{seq: 41, nonce: "mine", version: 7}, returnMayApply},
		{"not recorded, the record moved on, the count where it was", 8, pendingReturn{seq: 41, nonce: "mine", version: 7}, returnNot},
		{"the count went back (the fields dropped by a rewrite)", 8, pendingReturn{seq: 45, nonce: "mine", version: 7}, returnUnknown},
		{"before the window", 7, pendingReturn{seq: 37, nonce: "n37", version: 1}, returnUnknown},
	} {
		if got := returnOutcome(rec, tc.version, tc.p); got != tc.want {
			t.Errorf("%s: outcome %d, want %d", tc.name, got, tc.want)
		}
	}
	first := tagRecord{} // no return recorded: a first return, or fields dropped
	if got := returnOutcome(first, 3, pendingReturn{seq: 1, nonce: "mine", version: 2}); got != returnUnknown {
		t.Errorf("a tag's first return, the record moved on: outcome %d, want unknown (%d)", got, returnUnknown)
	}
	for _, tc := range []struct {
		name    string
		version int32
		p       pendingReturn
		want    int
	}{
		{"its nonce, last (again)", 7, pendingReturn{seq: 40, nonce: "n40", version: 6}, returnApplied},
	} {
		if got := returnOutcome(rec, tc.version, tc.p); got != tc.want {
			t.Errorf("%s: outcome %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A return whose answer was lost is never retried blindly. Node A returns
// [1005,2000) (applied, its answer lost); node B takes it (deleting its
// znode) while A cannot reach ZooKeeper; A then resolves its return from
// the record: applied, nothing more. Before, A's retry created the znode
// again and node C took the range a second time: 995 dense IDs served by
// both B and C. And the opposite cases: an attempt that did not land is
// made again (version-checked); one that fell out of the window of nonces
// is counted possibly lost, never retried.
func TestSegmentStore_LostReturnAnswerIsResolvedNotRetried(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	a, b, c := segmentStore(t, srv), segmentStore(t, srv), segmentStore(t, srv)
	if err := a.Create(ctx, Tag{Name: "lost", Start: 5, Step: 1000, MaxStep: 1000}); err != nil {
		t.Fatal(err)
	}
	held, _, err := a.Alloc(ctx, "lost", incOf(t, a, "lost"), 1000, 0) // [5,1005)
	if err != nil {
		t.Fatal(err)
	}
	r := Range{Lo: held.Lo + 5, Hi: held.Hi} // 5 issued, the rest goes back

	// applied, answer lost: what the multi did, without its answer.
	p := attemptReturn(t, a, "lost", r)
	took, _, err := b.Alloc(ctx, "lost", incOf(t, b, "lost"), 1000, 0)
	if err != nil || took != r {
		t.Fatalf("B's alloc: %v, %v; want the returned %v", took, err, r)
	}
	if err := a.returnFrom(ctx, "lost", incOf(t, a, "lost"), r, []pendingReturn{p}); err != nil {
		t.Fatalf("resolving the applied return: %v", err)
	}
	if got, err := c.Returned(ctx, "lost"); err != nil || len(got) != 0 {
		t.Fatalf("returned ranges after A resolved its return: %v, %v; want none (B holds it)", got, err)
	}
	next, _, err := c.Alloc(ctx, "lost", incOf(t, c, "lost"), 1000, 0)
	if err != nil || next.Lo < held.Hi {
		t.Fatalf("C's alloc %v (%v) overlaps the range B took %v", next, err, took)
	}

	// not applied: an attempt on a version the record has moved past, its
	// nonce nowhere: it cannot land any more, so the return is made again.
	r2 := Range{Lo: next.Lo + 1, Hi: next.Hi}
	rec, _, version, err := a.readRecord(ctx, "lost")
	if err != nil {
		t.Fatal(err)
	}
	never := pendingReturn{seq: rec.ReturnSeq + 1, nonce: "never-sent", version: version - 1}
	if err := a.returnFrom(ctx, "lost", incOf(t, a, "lost"), r2, []pendingReturn{never}); err != nil {
		t.Fatalf("an attempt that cannot land: %v", err)
	}
	if got, err := c.Returned(ctx, "lost"); err != nil || !slices.Equal(got, []Range{r2}) {
		t.Fatalf("returned ranges: %v, %v; want %v once", got, err, r2)
	}

	// unknown: more returns since than the record keeps nonces of.
	old := attemptReturn(t, a, "lost", Range{Lo: 1 << 50, Hi: 1<<50 + 1})
	for i := range maxReturnNonces {
		lo := int64(1<<51 + 10*i)
		if err := b.Return(ctx, "lost", incOf(t, b, "lost"), Range{Lo: lo, Hi: lo + 1}); err != nil {
			t.Fatal(err)
		}
	}
	before := a.PossiblyLost()
	err = a.returnFrom(ctx, "lost", incOf(t, a, "lost"), Range{Lo: 1 << 50, Hi: 1<<50 + 1}, []pendingReturn{old})
	if !errors.Is(err, errReturnUnknown) || a.PossiblyLost() != before+1 {
		t.Fatalf("a return out of the window: %v, possibly lost %d (was %d); want ErrReturnUnknown, counted", err, a.PossiblyLost(), before)
	}
}

// attemptReturn does what one attempt of Return does and reports it as if
// its answer had been lost.
func attemptReturn(t *testing.T, s *ZKStore, tag string, r Range) pendingReturn {
	t.Helper()
	ctx := context.Background()
	rec, raw, version, err := s.readRecord(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	p := pendingReturn{seq: rec.ReturnSeq + 1, nonce: zkclient.NewToken(), version: version}
	rec.ReturnSeq, rec.Returns = p.seq, append(rec.Returns, p.nonce)
	data, err := encodeRecord(rec, raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.z.Multi(ctx,
		&zk.SetDataRequest{Path: s.tagPath(tag), Data: data, Version: version},
		&zk.CreateRequest{Path: s.returnedPath(tag) + "/" + rangeName(r, rec.Incarnation), Acl: s.acl, Flags: zk.FlagPersistent}); err != nil {
		t.Fatalf("the return's multi: %v", err)
	}
	return p
}

// A rewrite of the tag record (an allocation, a return) keeps fields this
// version does not know: a newer node's fields survive an older one's
// writes.
func TestSegmentStore_RewriteKeepsUnknownFields(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s := segmentStore(t, srv)
	if err := s.Create(ctx, Tag{Name: "fields", Start: 1, Step: 10, MaxStep: 10}); err != nil {
		t.Fatal(err)
	}
	b, st, err := s.z.Get(ctx, s.tagPath("fields"))
	if err != nil {
		t.Fatal(err)
	}
	b = append(b[:len(b)-1], []byte(`,"future_field":{"x":1}}`)...)
	if _, err := s.z.Set(ctx, s.tagPath("fields"), b, st.Version); err != nil {
		t.Fatal(err)
	}
	r, _, err := s.Alloc(ctx, "fields", incOf(t, s, "fields"), 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Return(ctx, "fields", incOf(t, s, "fields"), Range{Lo: r.Lo + 1, Hi: r.Hi}); err != nil {
		t.Fatal(err)
	}
	b, _, err = s.z.Get(ctx, s.tagPath("fields"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"future_field":{"x":1}`) || !strings.Contains(string(b), `"return_seq":1`) {
		t.Fatalf("record after an alloc and a return: %s; want the unknown field kept and the return recorded", b)
	}
}

// A store never takes a range from a record whose max_id is below one it
// saw: ZooKeeper lost acknowledged writes (seen with a 3.8 ensemble whose
// leaders were killed in quick succession: the same range granted twice at
// the same version), and the ranges between were handed out already.
func TestSegmentStore_MaxIDWentBackIsRefused(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s, admin := segmentStore(t, srv), segmentStore(t, srv)
	if err := admin.Create(ctx, Tag{Name: "back", Start: 1, Step: 100, MaxStep: 100}); err != nil {
		t.Fatal(err)
	}
	b, st, err := admin.z.Get(ctx, admin.tagPath("back"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := s.Alloc(ctx, "back", incOf(t, s, "back"), 100, 0) // [1,101): max_id 101
	if err != nil {
		t.Fatal(err)
	}
	// ZooKeeper forgets the allocation: the record as it was before it.
	if _, err := admin.z.Set(ctx, admin.tagPath("back"), b, st.Version+1); err != nil {
		t.Fatal(err)
	}
	r, _, err := s.Alloc(ctx, "back", incOf(t, s, "back"), 100, 0)
	if !errors.Is(err, ErrWentBack) {
		t.Fatalf("Alloc after max_id went back from %d: %v, %v; want ErrWentBack and no range (it would repeat %v)", first.Hi, r, err, first)
	}
	if _, err := s.Tag(ctx, "back"); !errors.Is(err, ErrWentBack) {
		t.Fatalf("Tag after max_id went back: %v, want ErrWentBack", err)
	}
	// Another store, which never saw the higher max_id, cannot tell.
	if r, _, err := admin.Alloc(ctx, "back", incOf(t, admin, "back"), 100, 0); err != nil || r != first {
		t.Fatalf("a store that never saw it: %v, %v", r, err)
	}
}

// see tells a record that went back from a read that merely started before
// a write of the same store was answered: only a value shown by an
// operation that started after the higher one was seen counts.
func TestSegmentStoreSeeOrdersByStart(t *testing.T) {
	s := &ZKStore{log: testsupport.Log(t, nil)}
	read := s.ops.Add(1)  // a read starts …
	write := s.ops.Add(1) // … a write is answered with max_id 200
	if err := s.see("t", 1, 200, 0, write); err != nil {
		t.Fatal(err)
	}
	if err := s.see("t", 1, 100, 0, read); err != nil {
		t.Fatalf("a read that started before the write showed the older 100: %v, want no error", err)
	}
	if err := s.see("t", 1, 100, 0, s.ops.Add(1)); !errors.Is(err, ErrWentBack) {
		t.Fatalf("a read that started after the write showed 100: %v, want ErrWentBack", err)
	}
	if err := s.see("t", 1, 300, 0, s.ops.Add(1)); err != nil {
		t.Fatalf("a higher value: %v", err)
	}
}

// A return whose answer was lost, resolved after a rewrite of the record
// dropped the return fields (a node of a version before return nonces
// allocating during a rolling upgrade; a hand edit of max_id): the count
// went back, so whether it landed cannot be told, and it is counted
// possibly lost, never made again (it had landed, and another node holds
// the range).
func TestSegmentStore_ReturnFieldsDroppedByARewriteAreNotRetried(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	a, b, c := segmentStore(t, srv), segmentStore(t, srv), segmentStore(t, srv)
	if err := a.Create(ctx, Tag{Name: "reset", Start: 5, Step: 1000, MaxStep: 1000}); err != nil {
		t.Fatal(err)
	}
	held, _, err := a.Alloc(ctx, "reset", incOf(t, a, "reset"), 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := Range{Lo: held.Lo + 5, Hi: held.Hi}
	p := attemptReturn(t, a, "reset", r) // landed, answer lost
	if took, _, err := b.Alloc(ctx, "reset", incOf(t, b, "reset"), 1000, 0); err != nil || took != r {
		t.Fatalf("B's alloc: %v, %v; want the returned %v", took, err, r)
	}
	rec, _, version, err := c.readRecord(ctx, "reset")
	if err != nil {
		t.Fatal(err)
	}
	old := rec.Tag // an old node's rewrite: the typed fields only
	old.MaxID += 1000
	data, err := json.Marshal(struct {
		Tag
		LastAlloc string `json:"last_alloc"`
	}{old, "old-node"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.z.Set(ctx, c.tagPath("reset"), data, version); err != nil {
		t.Fatal(err)
	}
	before := a.PossiblyLost()
	if err := a.returnFrom(ctx, "reset", incOf(t, a, "reset"), r, []pendingReturn{p}); !errors.Is(err, errReturnUnknown) || a.PossiblyLost() != before+r.Len() {
		t.Fatalf("resolving it: %v, possibly lost +%d; want ErrReturnUnknown and the range counted", err, a.PossiblyLost()-before)
	}
	if got, err := c.Returned(ctx, "reset"); err != nil || len(got) != 0 {
		t.Fatalf("returned ranges %v (%v): the range B holds is back", got, err)
	}
}

// One store (one session, as in a node) whose Tag readers race its own
// allocations: a read that started before an allocation was answered may
// show the older max_id, and is no sign of ZooKeeper going back.
func TestSegmentStore_ConcurrentReadsAreNotWentBack(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s := segmentStore(t, srv)
	if err := s.Create(ctx, Tag{Name: "race", Start: 1, Step: 10, MaxStep: 10}); err != nil {
		t.Fatal(err)
	}
	var wentBack, reads atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := 0; i < 100_000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := s.Tag(ctx, "race")
				reads.Add(1)
				switch {
				case errors.Is(err, ErrWentBack):
					wentBack.Add(1)
				case err != nil:
					t.Error(err)
					return
				}
			}
		})
	}
	for range 200 {
		if _, _, err := s.Alloc(ctx, "race", incOf(t, s, "race"), 10, 0); err != nil {
			t.Errorf("alloc: %v", err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if n := wentBack.Load(); n > 0 {
		t.Fatalf("%d of %d reads refused as 'went back' beside 200 allocations of the same store", n, reads.Load())
	}
}

// incOf is the tag's incarnation, read without the store's checks.
func incOf(t *testing.T, s *ZKStore, tag string) int64 {
	t.Helper()
	ok, st, err := s.z.Exists(context.Background(), s.tagPath(tag))
	if err != nil || !ok {
		t.Fatalf("tag %q: exists %v, %v", tag, ok, err)
	}
	return st.Czxid
}

// A tag deleted and created again is a new incarnation (its znode's
// creation zxid): the old one's ranges are not taken, given back or keyed
// into it, a returned range without an incarnation (an older release's)
// is never taken, and the store's record of max_id starts afresh (the new
// tag's lower max_id is no "went back").
func TestSegmentStore_RecreatedTagIsANewIncarnation(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s := segmentStore(t, srv)
	opaque := Tag{Name: "re", Start: 1, Step: 100, MaxStep: 100, Opaque: &Opaque{Digits: 6}}
	old, held, oldKey := useAndDelete(t, s, opaque)
	// Reusing numbers knowingly: an opaque tag's tombstone refuses the
	// create otherwise (a new key repeats some of the old numbers).
	if err := s.Create(ctx, opaque, CreateOptions{ReuseNumbers: true}); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	inc := incOf(t, s, "re")
	if inc == old {
		t.Fatalf("the incarnation stayed %d across delete and create", inc)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"alloc", func() error { _, _, err := s.Alloc(ctx, "re", old, 100, 0); return err }()},
		{"return", s.Return(ctx, "re", old, Range{Lo: held.Lo + 10, Hi: held.Hi})},
		{"key", func() error { _, err := s.Key(ctx, "re", old); return err }()},
	} {
		if !errors.Is(tc.err, ErrTagGone) {
			t.Errorf("%s of the old incarnation: %v, want ErrTagGone", tc.name, tc.err)
		}
	}
	if got, err := s.Returned(ctx, "re"); err != nil || len(got) != 0 {
		t.Fatalf("returned ranges of the new tag: %v %v, want none (the old tag's went with it; the old node's return refused)", got, err)
	}
	if key, err := s.Key(ctx, "re", inc); err != nil || string(key) == string(oldKey) {
		t.Fatalf("the new tag's key: %v; want one of its own", err)
	}
	// An older release's return: a name without an incarnation.
	if _, err := s.z.Create(ctx, s.returnedPath("re")+"/"+fmt.Sprintf("%019d-%019d", 1, 51), nil, zk.FlagPersistent, s.acl); err != nil {
		t.Fatal(err)
	}
	r, tag, err := s.Alloc(ctx, "re", inc, 100, 0)
	if err != nil || r != (Range{Lo: 1, Hi: 101}) || tag.Incarnation != inc {
		t.Fatalf("first alloc of the new tag: %v %+v %v; want [1,101) by max_id (not the old-form return), incarnation %d", r, tag, err, inc)
	}
	if err := s.Return(ctx, "re", inc, Range{Lo: 60, Hi: 101}); err != nil {
		t.Fatal(err)
	}
	if r, _, err := s.Alloc(ctx, "re", inc, 100, 0); err != nil || r != (Range{Lo: 60, Hi: 101}) {
		t.Fatalf("the new incarnation's own return: %v %v", r, err)
	}
	kids, err := s.z.Children(ctx, s.tagPath("re"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "re"); err != nil {
		t.Fatalf("delete with an old-form returned range (%v): %v", kids, err)
	}
	if ok, _, err := s.z.Exists(ctx, s.tagPath("re")); err != nil || ok {
		t.Fatalf("tag znode after delete: exists %v %v", ok, err)
	}
}

// useAndDelete creates tag, allocates two ranges of it (max_id 201),
// returns [150,201) and deletes it (a second delete finds it gone). It
// returns the incarnation, the first range and the key it had.
func useAndDelete(t *testing.T, s *ZKStore, tag Tag) (inc int64, held Range, key []byte) {
	t.Helper()
	ctx := context.Background()
	if err := s.Create(ctx, tag); err != nil {
		t.Fatal(err)
	}
	inc = incOf(t, s, tag.Name)
	held, _, err := s.Alloc(ctx, tag.Name, inc, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Alloc(ctx, tag.Name, inc, 100, 0); err != nil { // max_id 201
		t.Fatal(err)
	}
	key, err = s.Key(ctx, tag.Name, inc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Return(ctx, tag.Name, inc, Range{Lo: 150, Hi: 201}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, tag.Name); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, tag.Name); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("deleting a missing tag: %v, want ErrUnknownTag", err)
	}
	return inc, held, key
}

// set-max raises max_id (the next allocation starts there), leaves it when
// equal, and refuses to lower it, naming both numbers.
func TestSegmentStore_SetMax(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s := segmentStore(t, srv)
	if err := s.Create(ctx, Tag{Name: "m", Start: 1, Step: 10, MaxStep: 10}); err != nil {
		t.Fatal(err)
	}
	inc := incOf(t, s, "m")
	if _, _, err := s.Alloc(ctx, "m", inc, 10, 0); err != nil { // max_id 11
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n       int64
		was     int64
		wantErr error
		maxID   int64
	}{
		{n: 5000, was: 11, maxID: 5000},
		{n: 5000, was: 5000, maxID: 5000},
		{n: 4999, was: 5000, wantErr: ErrMaxIDBelow, maxID: 5000},
	} {
		was, err := s.SetMax(ctx, "m", tc.n)
		if !errors.Is(err, tc.wantErr) || was != tc.was {
			t.Errorf("set-max %d: was %d, %v; want was %d, %v", tc.n, was, err, tc.was, tc.wantErr)
		}
		if err != nil && (!strings.Contains(err.Error(), "4999") || !strings.Contains(err.Error(), "5000")) {
			t.Errorf("refusal %q does not name both numbers", err)
		}
		if tag, err := s.Tag(ctx, "m"); err != nil || tag.MaxID != tc.maxID {
			t.Errorf("after set-max %d: max_id %d %v, want %d", tc.n, tag.MaxID, err, tc.maxID)
		}
	}
	if r, _, err := s.Alloc(ctx, "m", inc, 10, 0); err != nil || r.Lo != 5000 {
		t.Fatalf("alloc after set-max: %v %v, want from 5000", r, err)
	}
	if _, err := s.SetMax(ctx, "nope", 10); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("set-max of a missing tag: %v", err)
	}
}

// WatchTag fires (true) when the tag's incarnation is deleted, by
// another session; armed for an incarnation gone already it fails.
func TestSegmentStore_WatchTagFiresOnDelete(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s, admin := segmentStore(t, srv), segmentStore(t, srv)
	if err := admin.Create(ctx, Tag{Name: "w", Start: 1, Step: 10, MaxStep: 10}); err != nil {
		t.Fatal(err)
	}
	inc := incOf(t, s, "w")
	ch, err := s.WatchTag(ctx, "w", inc)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.Alloc(ctx, "w", inc, 10, 0); err != nil { // a write to the record: no fire
		t.Fatal(err)
	}
	select {
	case d := <-ch:
		t.Fatalf("the watch fired (%v) on an allocation", d)
	case <-time.After(200 * time.Millisecond):
	}
	if err := admin.Delete(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-ch:
		if !d {
			t.Fatal("the watch ended without reporting the delete")
		}
	case <-time.After(waitLong):
		t.Fatal("the delete did not fire the watch")
	}
	if err := admin.Create(ctx, Tag{Name: "w", Start: 1, Step: 10, MaxStep: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WatchTag(ctx, "w", inc); !errors.Is(err, ErrTagGone) {
		t.Fatalf("watch of a gone incarnation: %v, want ErrTagGone", err)
	}
}
