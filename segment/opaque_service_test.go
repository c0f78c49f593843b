package segment_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"codeberg.org/snowflaked/snowflaked/segment"
)

// keyedStore is a memStore that holds opaque tags' keys.
type keyedStore struct{ *memStore }

// Key is a key of its own for each incarnation of the tag.
func (k keyedStore) Key(_ context.Context, tag string, inc int64) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.goneLocked(tag, inc); err != nil {
		return nil, err
	}
	return keyFor(inc), nil
}

func keyFor(inc int64) []byte { return bytes.Repeat([]byte{byte(inc)}, segment.OpaqueKeySize) }

// An opaque tag served by the real service: its numbers are the
// permutation of its counter, distinct, and the last one is followed by
// ErrExhausted, never by a number handed out twice or out of range.
func TestOpaqueTagServedAndExhausted(t *testing.T) {
	st := keyedStore{newMemStore()}
	const n = 900_000 // 6 digits
	st.create("acct", 1, 10, 10)
	st.mu.Lock()
	st.tags["acct"].Opaque = &segment.Opaque{Digits: 6}
	st.tags["acct"].MaxID = 1 + n - 25 // 25 numbers left
	st.mu.Unlock()
	s := newService(t, segment.Config{Store: st, StateFile: filepath.Join(t.TempDir(), "state")})
	perm, err := segment.NewPermutation(segment.Opaque{Digits: 6}, keyFor(st.tags["acct"].Incarnation))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	var err2 error
	for range 40 {
		var ids []int64
		ids, err2 = s.Take(context.Background(), "acct", nil, 1)
		if err2 != nil {
			break
		}
		id := ids[0]
		i, err := perm.Index(id)
		if err != nil || seen[id] || i < n-25 || i >= n {
			t.Fatalf("number %d (index %d, %v): twice, or not one of the last 25", id, i, err)
		}
		seen[id] = true
	}
	if !errors.Is(err2, segment.ErrExhausted) || len(seen) != 25 {
		t.Fatalf("after %d numbers: %v, want all 25 then ErrExhausted", len(seen), err2)
	}
	// Requests after the end are refused, and the node's count of issued
	// numbers (snowflaked_segment_issued_total) stays at what it delivered:
	// the counter values past N a refused batch used up are no numbers.
	for range 5 {
		if ids, err := s.Take(context.Background(), "acct", nil, 1); err == nil {
			t.Fatalf("after the end: %v", ids)
		}
	}
	for _, ts := range s.Status() {
		if ts.Tag == "acct" && ts.Issued != 25 {
			t.Fatalf("status says %d issued, want the 25 delivered", ts.Issued)
		}
	}
	// A store without keys serves no opaque tag.
	plain := newMemStore()
	plain.create("acct", 1, 10, 10)
	plain.tags["acct"].Opaque = &segment.Opaque{Digits: 6}
	s2 := newService(t, segment.Config{Store: plain, StateFile: filepath.Join(t.TempDir(), "state")})
	if _, err := s2.Take(context.Background(), "acct", nil, 1); err == nil {
		t.Error("an opaque tag served without its key")
	}
}
