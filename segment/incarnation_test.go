package segment_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/segment"
)

// opaqueStore is a keyed memStore with one opaque tag of 6 digits.
func opaqueStore(t *testing.T, name string) keyedStore {
	t.Helper()
	st := keyedStore{newMemStore()}
	st.create(name, 1, 100, 100)
	st.mu.Lock()
	st.tags[name].Opaque = &segment.Opaque{Digits: 6}
	st.mu.Unlock()
	return st
}

// checkOpaque fails unless every id is a 6-digit number of the tag's
// current incarnation's permutation, none seen before.
func checkOpaque(t *testing.T, st keyedStore, name string, seen map[int64]string, who string, ids []int64) {
	t.Helper()
	st.mu.Lock()
	inc := st.tags[name].Incarnation
	st.mu.Unlock()
	perm, err := segment.NewPermutation(segment.Opaque{Digits: 6}, keyFor(inc))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if id < 100_000 || id > 999_999 {
			t.Fatalf("%s: %d is not a 6-digit number: the counter served raw", who, id)
		}
		if _, err := perm.Index(id); err != nil {
			t.Fatalf("%s: %d: %v", who, id, err)
		}
		if prev, ok := seen[id]; ok {
			t.Fatalf("%s: %d handed out twice (before by %s)", who, id, prev)
		}
		seen[id] = who
	}
}

// An opaque tag hands out permuted numbers whatever path its range took:
// a fresh allocation, the state file resumed after a kill -9, a range
// returned by a clean stop and taken again. The resumed path served the
// raw counter (the key was tied to the buffer made on a first Take, not to
// the ranges).
func TestOpaqueNumbersWhateverPathTheRangeTook(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*segment.Service)
	}{
		{"kill -9, state file resumed", func(s *segment.Service) { s.Crash() }},
		{"clean stop, range returned", func(s *segment.Service) {
			if _, err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}},
		{"stop without the store, state file resumed exactly", func(s *segment.Service) {
			if err := s.Abandon(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := opaqueStore(t, "acct")
			file := filepath.Join(t.TempDir(), "seg.json")
			seen := map[int64]string{}
			for run := range 4 {
				s, err := segment.New(segment.Config{Store: st, StateFile: file, Incarnation: "c", MarkAhead: time.Nanosecond})
				if err != nil {
					t.Fatal(err)
				}
				for range 3 {
					checkOpaque(t, st, "acct", seen, "run "+string(rune('0'+run)), take(t, s, "acct", 7))
				}
				tc.stop(s)
			}
		})
	}
}

// A tag deleted and created again under a running node: the node's next
// ZooKeeper request for it (a range load) finds the incarnation gone, so it
// drops the old ranges (never returns them), serves the new tag's numbers
// under the new key, and its clean stop returns only ranges of the new
// incarnation. A node that held old ranges gave them back into the new tag
// (the same numbers twice) and kept mapping with the old key.
func TestRecreatedTagSharesNothingWithTheOld(t *testing.T) {
	st := opaqueStore(t, "acct")
	fileA := filepath.Join(t.TempDir(), "a.json")
	a, err := segment.New(segment.Config{Store: st, StateFile: fileA, MarkAhead: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	old := map[int64]string{}
	checkOpaque(t, st, "acct", old, "A before", take(t, a, "acct", 30)) // A holds the rest of [1,101), maybe [101,201)

	st.remove("acct")
	st.create("acct", 1, 100, 100)
	st.mu.Lock()
	st.tags["acct"].Opaque = &segment.Opaque{Digits: 6}
	st.mu.Unlock()

	seen := map[int64]string{}
	b := newService(t, segment.Config{Store: st})
	checkOpaque(t, st, "acct", seen, "B", take(t, b, "acct", 150)) // [1,101) and [101,201) of the new tag
	// A serves until its next load finds the incarnation gone; every number
	// it hands out after that is of the new tag's key.
	deadline := time.Now().Add(5 * time.Second)
	for ; ; time.Sleep(time.Millisecond) {
		ids := take(t, a, "acct", 1)
		st.mu.Lock()
		inc := st.tags["acct"].Incarnation
		st.mu.Unlock()
		perm, _ := segment.NewPermutation(segment.Opaque{Digits: 6}, keyFor(inc))
		if i, err := perm.Index(ids[0]); err == nil && i >= 150 {
			checkOpaque(t, st, "acct", seen, "A after", ids)
			break
		}
		if _, dup := old[ids[0]]; dup {
			t.Fatalf("A handed out %d twice", ids[0])
		}
		old[ids[0]] = "A (old ranges)"
		if time.Now().After(deadline) {
			t.Fatal("A never left the deleted incarnation's ranges")
		}
	}
	checkOpaque(t, st, "acct", seen, "A after", take(t, a, "acct", 20))
	if _, err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Everything returned is of the new tag and unissued: drain it.
	drain := newService(t, segment.Config{Store: st})
	if n := st.returnedTotal("acct"); n > 0 {
		checkOpaque(t, st, "acct", seen, "drain", take(t, drain, "acct", int(n)))
	}
}

// A state-file entry of an incarnation that is gone is dropped, not
// resumed: a node killed while holding ranges of a tag that was then
// deleted and created again starts on the new tag's own ranges.
func TestStateFileEntryOfAGoneIncarnationIsDropped(t *testing.T) {
	st := newMemStore()
	st.create("x", 1, 100, 100)
	file := filepath.Join(t.TempDir(), "seg.json")
	s1, err := segment.New(segment.Config{Store: st, StateFile: file, Incarnation: "c"})
	if err != nil {
		t.Fatal(err)
	}
	take(t, s1, "x", 5)
	s1.Crash()
	st.remove("x")
	st.create("x", 1, 100, 100)
	other := newService(t, segment.Config{Store: st})
	byOther := take(t, other, "x", 50) // 1..50 of the new tag
	s2 := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "c"})
	ids := take(t, s2, "x", 10)
	for _, id := range ids {
		if id <= byOther[len(byOther)-1] && id >= byOther[0] {
			t.Fatalf("restarted node handed out %d, which the new tag's other node did: the gone incarnation's range was resumed", id)
		}
	}
}

// A state file written by a release before tag incarnations lists ranges
// of no known incarnation: dropped (lost, never reissued), not resumed.
func TestStateFileWithoutTagIncarnationsIsDropped(t *testing.T) {
	st := newMemStore()
	st.create("x", 1, 100, 100)
	file := filepath.Join(t.TempDir(), "seg.json")
	if err := os.WriteFile(file, []byte(`{"incarnation":"c","unissued":{"x":[{"lo":1,"hi":101}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "c"})
	take(t, s, "x", 1)
	if st.maxID("x") == 1 {
		t.Fatal("the old entry was resumed: no range allocated")
	}
}

// Resumed ranges of a plain tag serve while the store cannot confirm
// their incarnation (ZooKeeper down: a Take waits Config.Wait for it, then
// serves); an opaque tag's are not served without their incarnation's key.
func TestResumedRangesWhileTheStoreIsDown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opaque bool
	}{{"plain", false}, {"opaque", true}} {
		t.Run(tc.name, func(t *testing.T) {
			st := opaqueStore(t, "t")
			if !tc.opaque {
				st.mu.Lock()
				st.tags["t"].Opaque = nil
				st.mu.Unlock()
			}
			file := filepath.Join(t.TempDir(), "seg.json")
			s1, err := segment.New(segment.Config{Store: st, StateFile: file, Incarnation: "c"})
			if err != nil {
				t.Fatal(err)
			}
			take(t, s1, "t", 3)
			s1.Crash()
			st.setDown(true)
			s2 := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "c", Wait: 200 * time.Millisecond})
			ids, err := s2.Take(context.Background(), "t", nil, 2)
			switch {
			case tc.opaque && !errors.Is(err, segment.ErrUnavailable):
				t.Fatalf("opaque tag without its key: %v %v, want ErrUnavailable", ids, err)
			case !tc.opaque && (err != nil || ids[0] <= 3):
				t.Fatalf("plain tag with the store down: %v %v, want IDs after 3", ids, err)
			}
			st.setDown(false)
			deadline := time.Now().Add(5 * time.Second)
			for {
				ids, err := s2.Take(context.Background(), "t", nil, 2)
				if err == nil {
					if tc.opaque && ids[0] < 100_000 {
						t.Fatalf("opaque tag served %v", ids)
					}
					return
				}
				if time.Now().After(deadline) || !strings.Contains(err.Error(), "unavailable") {
					t.Fatalf("after the store came back: %v", err)
				}
			}
		})
	}
}

// A node that holds ranges of a tag learns of its deletion from the
// store's watch, before any request: it drops them at once, so a tag
// created again right after never sees the old tag's numbers from it. A
// store without watches leaves it serving them until its next load (the
// case noWatch shows: the old range is still held).
func TestRunningNodeDropsADeletedTagAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noWatch bool
	}{{"with the store's watch", false}, {"without watches", true}} {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			st.noWatch = tc.noWatch
			st.create("x", 1, 1000, 1000)
			s := newService(t, segment.Config{Store: st})
			old := take(t, s, "x", 10) // holds [11,1001)
			st.remove("x")
			st.create("x", 1, 1000, 1000)
			heldOld := func() bool {
				for _, ts := range s.Status() {
					if ts.Tag == "x" && len(ts.Held) > 0 && ts.Held[0].Lo == old[len(old)-1]+1 {
						return true
					}
				}
				return false
			}
			deadline := time.Now().Add(2 * time.Second)
			for heldOld() && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if tc.noWatch {
				if !heldOld() {
					t.Fatal("without watches the old range went: the test cannot tell the watch's work")
				}
				return
			}
			if heldOld() {
				t.Fatal("the deleted tag's range is still held 2s after the delete")
			}
			other := newService(t, segment.Config{Store: st})
			byOther := take(t, other, "x", 100) // 1..100 of the new tag
			if ids := take(t, s, "x", 100); ids[0] <= byOther[len(byOther)-1] {
				t.Fatalf("after the delete the node handed out %d…, the new tag's other node %d…%d", ids[0], byOther[0], byOther[len(byOther)-1])
			}
		})
	}
}
