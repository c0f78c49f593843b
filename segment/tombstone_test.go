package segment

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestSegmentStore_TagTombstone: a deleted tag leaves its max_id, and a tag
// created again under its name starts there (no start given), refuses a
// start below it (ErrNumbersIssued naming it and --reuse-numbers) unless
// told to reuse numbers, and accepts one at or above it. A second delete
// keeps the higher max_id.
func TestSegmentStore_TagTombstone(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s := segmentStore(t, srv)
	tag := Tag{Name: "o", Start: 1, MaxID: 1, Step: 10, MaxStep: 10}
	if err := s.Create(ctx, tag); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := s.Alloc(ctx, "o", incOf(t, s, "o"), 10, 0); err != nil { // max_id 31
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		start     int64
		opts      CreateOptions
		wantErr   error
		wantStart int64
	}{
		{name: "explicit start below max_id", start: 1, opts: CreateOptions{StartGiven: true}, wantErr: ErrNumbersIssued},
		{name: "explicit start one below", start: 30, opts: CreateOptions{StartGiven: true}, wantErr: ErrNumbersIssued},
		{name: "no start given", start: 1, wantStart: 31},
		{name: "explicit start at max_id", start: 31, opts: CreateOptions{StartGiven: true}, wantStart: 31},
		{name: "explicit start above", start: 500, opts: CreateOptions{StartGiven: true}, wantStart: 500},
		{name: "reuse numbers knowingly", start: 1, opts: CreateOptions{StartGiven: true, ReuseNumbers: true}, wantStart: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := tag
			tg.Start, tg.MaxID = tc.start, tc.start
			err := s.Create(ctx, tg, tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), "max_id 31") || !strings.Contains(err.Error(), "--reuse-numbers") {
					t.Fatalf("Create: %v; want %v naming max_id 31 and --reuse-numbers", err, tc.wantErr)
				}
				if _, err := s.Tag(ctx, "o"); !errors.Is(err, ErrUnknownTag) {
					t.Fatalf("a refused create left the tag: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Tag(ctx, "o")
			if err != nil || got.Start != tc.wantStart || got.MaxID != tc.wantStart {
				t.Fatalf("tag created again: start %d, max_id %d, %v; want both %d", got.Start, got.MaxID, err, tc.wantStart)
			}
			// Deleted again: the tombstone keeps the higher max_id.
			if err := s.Delete(ctx, "o"); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := s.Create(ctx, tag); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Tag(ctx, "o"); err != nil || got.Start != 500 {
		t.Fatalf("after creates and deletes up to max_id 500 the tag starts at %d, %v; want 500", got.Start, err)
	}
}

// TestSegmentStore_OpaqueTombstoneRefusesTheName: over the tombstone of an
// opaque tag, or with an opaque tag over a plain one's, a create is
// refused whatever its start (another key repeats some of the old
// numbers), unless told to reuse numbers.
func TestSegmentStore_OpaqueTombstoneRefusesTheName(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s := segmentStore(t, srv)
	opaque := Tag{Name: "op", Start: 1, MaxID: 1, Step: 10, MaxStep: 10, Opaque: &Opaque{Digits: 6}}
	plain := Tag{Name: "pl", Start: 1, MaxID: 1, Step: 10, MaxStep: 10}
	for _, tg := range []Tag{opaque, plain} {
		if err := s.Create(ctx, tg); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, tg.Name); err != nil {
			t.Fatal(err)
		}
	}
	again := plain
	again.Name = "op"
	overPlain := opaque
	overPlain.Name = "pl"
	for _, tg := range []Tag{opaque, again, overPlain} {
		if err := s.Create(ctx, tg); !errors.Is(err, ErrNumbersIssued) || !strings.Contains(err.Error(), "keyed permutation") {
			t.Fatalf("create %q (opaque %v) over a tombstone: %v; want ErrNumbersIssued", tg.Name, tg.Opaque != nil, err)
		}
	}
	if err := s.Create(ctx, opaque, CreateOptions{ReuseNumbers: true}); err != nil {
		t.Fatalf("create with numbers reused knowingly: %v", err)
	}
}

// TestSegmentStore_NoTagInAClusterBeingDeleted: a cluster marked as being
// deleted takes no new tag (its delete would remove it without a
// tombstone).
func TestSegmentStore_NoTagInAClusterBeingDeleted(t *testing.T) {
	srv := newSegmentCluster(t)
	ctx := context.Background()
	s := segmentStore(t, srv)
	z, cluster := s.Cluster()
	b, st, err := z.Get(ctx, cluster)
	if err != nil {
		t.Fatal(err)
	}
	marked := strings.Replace(string(b), `"requires":[`, `"requires":["deleting",`, 1)
	if marked == string(b) {
		t.Fatalf("cluster data without a requires list: %s", b)
	}
	if _, err := z.Set(ctx, cluster, []byte(marked), st.Version); err != nil {
		t.Fatal(err)
	}
	err = s.Create(ctx, Tag{Name: "late", Start: 1, MaxID: 1, Step: 10, MaxStep: 10})
	if err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("Create in a cluster being deleted: %v; want a refusal", err)
	}
}
