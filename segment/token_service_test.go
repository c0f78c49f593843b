package segment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/segment"
)

// tokenMem is memStore with token tags: the hash of one token per tag.
type tokenMem struct {
	*memStore
	hashes map[string]string
}

func (m *tokenMem) Tokens(_ context.Context, tag string, inc int64) (segment.TokenSet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return segment.TokenSet{}, errDown
	}
	return segment.TokenSet{Incarnation: inc, Hashes: []segment.TokenHash{{SHA256: m.hashes[tag]}}}, nil
}

// newTokenMem has a tag "s" that requires token and takes at most 10 IDs a
// request, and a plain tag "p".
func newTokenMem(token string) *tokenMem {
	st := &tokenMem{memStore: newMemStore(), hashes: map[string]string{"s": segment.HashToken([]byte(token))}}
	st.create("s", 1, 100, 100)
	st.create("p", 1, 100, 100)
	st.tags["s"].RequireToken, st.tags["s"].MaxCount = true, 10
	return st
}

// A tag that requires a token is served only with it, and within its
// ceiling; after a crash, the state file says so: a restart with the store
// down serves its resumed ranges to nobody (the plain tag's serve, as
// before, once a Take waited for the check).
func TestTakeWithToken(t *testing.T) {
	token := segment.NewToken()
	st := newTokenMem(token)
	file := filepath.Join(t.TempDir(), "seg.json")
	s1, err := segment.New(segment.Config{Store: st, StateFile: file, Incarnation: "i", Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name, tag, token string
		n                int
		want             error
	}{
		{"no token", "s", "", 1, segment.ErrTokenRequired},
		{"wrong token", "s", segment.NewToken(), 1, segment.ErrTokenInvalid},
		{"its token", "s", token, 1, nil},
		{"its token, at the ceiling", "s", token, 10, nil},
		{"its token, above the ceiling", "s", token, 11, segment.ErrCountAboveMax},
		{"plain tag, no token", "p", "", 1, nil},
		{"plain tag, any token", "p", "x", 50, nil},
	} {
		ids, err := s1.TakeWithToken(ctx, tc.tag, []byte(tc.token), nil, tc.n)
		if !errors.Is(err, tc.want) || err == nil && len(ids) != tc.n {
			t.Errorf("%s: %d IDs, %v; want %v", tc.name, len(ids), err, tc.want)
		}
	}
	if _, err := s1.Take(ctx, "s", nil, 1); !errors.Is(err, segment.ErrTokenRequired) {
		t.Errorf("Take (no token) of a token tag: %v, want ErrTokenRequired", err)
	}
	for _, ts := range s1.Status() {
		if ts.Tag == "s" && (!ts.Token || ts.RefusedRequired != 2 || ts.RefusedInvalid != 1) {
			t.Errorf("status of s: %+v; want token, 2 refused without, 1 with a wrong one", ts)
		}
	}
	s1.Crash()

	st.setDown(true)
	s2 := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "i", Wait: 200 * time.Millisecond})
	if _, err := s2.TakeWithToken(ctx, "s", nil, nil, 1); !errors.Is(err, segment.ErrTokenRequired) {
		t.Errorf("resumed token tag, store down, no token: %v, want ErrTokenRequired", err)
	}
	if _, err := s2.TakeWithToken(ctx, "s", []byte(token), nil, 1); !errors.Is(err, segment.ErrUnavailable) {
		t.Errorf("resumed token tag, store down, its token: %v, want ErrUnavailable (its hashes unknown)", err)
	}
	// The plain tag is resumed when the state file lists ranges of it above
	// its mark; how far the mark ran ahead of the Takes depends on timing.
	if stateLists(t, file, "p") {
		if _, err := s2.TakeWithToken(ctx, "p", nil, nil, 1); err != nil {
			t.Errorf("resumed plain tag, store down: %v, want its resumed IDs", err)
		}
	} else if _, err := s2.TakeWithToken(ctx, "p", nil, nil, 1); !errors.Is(err, segment.ErrUnavailable) {
		t.Errorf("plain tag with nothing to resume, store down: %v, want ErrUnavailable", err)
	}
	st.setDown(false)
	testPoll(t, func() bool {
		_, err := s2.TakeWithToken(ctx, "s", []byte(token), nil, 1)
		return err == nil
	})
}

// stateLists reports whether the state file lists ranges of tag.
func stateLists(t *testing.T, file, tag string) bool {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Tags map[string]json.RawMessage `json:"tags"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("state file %s: %v", raw, err)
	}
	_, ok := st.Tags[tag]
	return ok
}

// testPoll waits, bounded, until cond holds.
func testPoll(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A tag's ceiling holds for its resumed ranges too: the state file keeps
// it, so a restart with the store down refuses a request above it; and a
// state file that does not know it (a release before it was kept) has the
// request that waited for the store's answer checked again once the tag's
// record arrives, not served above the ceiling.
func TestResumedTagKeepsItsCeiling(t *testing.T) {
	st := newTokenMem(segment.NewToken())
	st.create("c", 1, 100, 100)
	st.tags["c"].MaxCount = 10
	file := filepath.Join(t.TempDir(), "seg.json")
	ctx := context.Background()
	s1, err := segment.New(segment.Config{Store: st, StateFile: file, Incarnation: "i", Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Take(ctx, "c", nil, 1); err != nil {
		t.Fatal(err)
	}
	s1.Crash()

	st.setDown(true)
	s2 := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "i", Wait: 200 * time.Millisecond})
	if ids, err := s2.Take(ctx, "c", nil, 11); !errors.Is(err, segment.ErrCountAboveMax) {
		t.Errorf("resumed tag, store down, 11 IDs of a tag of at most 10: %d IDs, %v; want ErrCountAboveMax", len(ids), err)
	}
	if ids, err := s2.Take(ctx, "c", nil, 10); err != nil || len(ids) != 10 {
		t.Errorf("resumed tag, store down, 10 IDs: %d, %v; want its resumed IDs", len(ids), err)
	}
	s2.Crash()

	// The same file as a release before the ceiling was kept wrote it.
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	tags, _ := doc["tags"].(map[string]any)
	c, _ := tags["c"].(map[string]any)
	if c == nil || c["max_count"] != float64(10) {
		t.Fatalf("state file %s: want the tag c with max_count 10", raw)
	}
	delete(c, "max_count")
	if raw, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	s3 := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "i", Wait: 10 * time.Second})
	done := make(chan error, 1)
	go func() {
		ids, err := s3.Take(ctx, "c", nil, 11)
		if err == nil {
			err = fmt.Errorf("%d IDs served", len(ids))
		}
		done <- err
	}()
	testPoll(t, func() bool { return s3.Stalls() > 0 }) // the Take looked once and waits for the store
	st.setDown(false)
	select {
	case err := <-done:
		if !errors.Is(err, segment.ErrCountAboveMax) {
			t.Errorf("old state file, 11 IDs asked while the store was down, answered once it is back: %v; want ErrCountAboveMax", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the Take never answered")
	}
}
