package segment

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestSegmentStore_StaleWriteNeverLandsOnANewIncarnation: a writer reads a
// tag's record, stalls across segment delete, segment create and as many
// allocations as the old tag had versions, then writes at the version it
// read. A version check alone lets that write land and put the old
// max_id back (a node that never saw the new one would hand out numbers
// twice); the incarnation's marker, checked in the same multi, refuses
// it. The same for a tag created before markers, whose first write adds
// one.
func TestSegmentStore_StaleWriteNeverLandsOnANewIncarnation(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := map[bool]string{false: "marked tag", true: "tag from before markers"}[legacy]
		t.Run(name, func(t *testing.T) {
			srv := newSegmentCluster(t)
			ctx := context.Background()
			a, b, c, d := segmentStore(t, srv), segmentStore(t, srv), segmentStore(t, srv), segmentStore(t, srv)
			if err := a.Create(ctx, Tag{Name: "sv", Start: 1, Step: 100, MaxStep: 100}); err != nil {
				t.Fatal(err)
			}
			if legacy { // as a release before markers wrote it
				unmark(t, a, "sv")
			}
			old := incOf(t, a, "sv")
			allocs := 3
			if legacy {
				allocs = 0 // the first allocation of this release would add the marker
			}
			for range allocs {
				if _, _, err := a.Alloc(ctx, "sv", old, 100, 0); err != nil {
					t.Fatal(err)
				}
			}
			// B reads and builds its write as Alloc does, then stalls.
			rec, raw, version, err := b.readRecord(ctx, "sv")
			if err != nil || rec.Incarnation != old || (rec.Marker == "") != legacy {
				t.Fatalf("read: %+v, %v", rec, err)
			}
			rec.Tag.MaxID += 100
			pre, rec := b.guard("sv", rec)
			data, err := encodeRecord(rec, raw)
			if err != nil {
				t.Fatal(err)
			}
			// Meanwhile: delete, create, and C allocates up to the version B read.
			if err := a.Delete(ctx, "sv"); err != nil {
				t.Fatal(err)
			}
			if err := a.Create(ctx, Tag{Name: "sv", Start: 1, Step: 1000, MaxStep: 1000}); err != nil {
				t.Fatal(err)
			}
			inc := incOf(t, c, "sv")
			issued := allocUpTo(t, c, "sv", inc, version)
			failed, err := b.z.Multi(ctx, append(pre, &zk.SetDataRequest{Path: b.tagPath("sv"), Data: data, Version: version})...)
			if err == nil {
				t.Fatalf("the stale write landed on the new incarnation %d (read from %d)", inc, old)
			}
			if failed >= len(pre) || !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNodeExists) {
				t.Fatalf("the stale write failed at op %d with %v, want the guard's NoNode or NodeExists", failed, err)
			}
			r, _, err := d.Alloc(ctx, "sv", inc, 1000, 0)
			if err != nil {
				t.Fatalf("D alloc: %v", err)
			}
			for _, x := range issued {
				if r.Lo < x.Hi && x.Lo < r.Hi {
					t.Errorf("D got %v, which overlaps %v already issued by C in incarnation %d", r, x, inc)
				}
			}
		})
	}
}

// unmark makes tag's record and znodes as a release before incarnation
// markers wrote them: no marker in the record, no marker znodes.
func unmark(t *testing.T, a *ZKStore, tag string) {
	t.Helper()
	ctx := context.Background()
	raw, _, err := a.z.Get(ctx, a.tagPath(tag))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	marker := m["marker"]
	delete(m, "marker")
	nb, _ := json.Marshal(m)
	var id string
	_ = json.Unmarshal(marker, &id)
	if _, err := a.z.Multi(ctx,
		&zk.SetDataRequest{Path: a.tagPath(tag), Data: nb, Version: -1},
		&zk.DeleteRequest{Path: a.markerPath(tag, id), Version: -1},
		&zk.DeleteRequest{Path: a.markedPath(tag), Version: -1}); err != nil {
		t.Fatal(err)
	}
}

// allocUpTo allocates ranges of 1000 from tag's incarnation inc until its
// record's version reaches version, and returns them.
func allocUpTo(t *testing.T, c *ZKStore, tag string, inc int64, version int32) []Range {
	t.Helper()
	ctx := context.Background()
	var issued []Range
	for range 100 {
		_, st, _ := c.z.Exists(ctx, c.tagPath(tag))
		if st.Version >= version {
			break
		}
		r, _, err := c.Alloc(ctx, tag, inc, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		issued = append(issued, r)
	}
	return issued
}
