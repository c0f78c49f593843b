package segment_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/segment"
)

func newService(t *testing.T, cfg segment.Config) *segment.Service {
	t.Helper()
	s, err := segment.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // Close retries returns until then
		defer cancel()
		_, _ = s.Close(ctx)
	})
	return s
}

func take(t *testing.T, s *segment.Service, tag string, n int) []int64 {
	t.Helper()
	ids, err := s.Take(context.Background(), tag, nil, n)
	if err != nil {
		t.Fatalf("take %d of %q: %v", n, tag, err)
	}
	if len(ids) != n {
		t.Fatalf("take %d of %q: got %d IDs", n, tag, len(ids))
	}
	return ids
}

// ledger records every ID issued and fails on a duplicate.
type ledger struct {
	mu   sync.Mutex
	seen map[int64]string
	dups int
}

func newLedger() *ledger { return &ledger{seen: map[int64]string{}} }

func (l *ledger) add(t *testing.T, who string, ids []int64) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if prev, ok := l.seen[id]; ok {
			l.dups++
			if l.dups < 5 {
				t.Errorf("ID %d issued twice: by %s and %s", id, prev, who)
			}
		}
		l.seen[id] = who
	}
}

func (l *ledger) span() (n, lo, hi int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lo = 1<<63 - 1
	for id := range l.seen {
		lo, hi = min(lo, id), max(hi, id)
	}
	return int64(len(l.seen)), lo, hi
}

// Many goroutines on three services sharing one store: no duplicate, and
// each goroutine's IDs increase (a service hands out in increasing order).
func TestConcurrentServicesNoDuplicate(t *testing.T) {
	st := newMemStore()
	st.create("orders", 1, 50, 5000)
	l := newLedger()
	var wg sync.WaitGroup
	for node := range 3 {
		s := newService(t, segment.Config{Store: st, StateFile: filepath.Join(t.TempDir(), "seg.json"), Holder: "n"})
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var last int64
				for i := range 300 {
					ids, err := s.Take(context.Background(), "orders", nil, 1+i%7)
					if err != nil {
						t.Error(err)
						return
					}
					for _, id := range ids {
						if id <= last {
							t.Errorf("node %d goroutine %d: %d after %d", node, g, id, last)
							return
						}
						last = id
					}
					l.add(t, "node", ids)
				}
			}()
		}
	}
	wg.Wait()
	n, lo, hi := l.span()
	t.Logf("%d IDs over [%d,%d], %d range loads", n, lo, hi, st.allocCount())
}

// A clean stop returns what is left, and the next start anywhere takes it
// first: N clean restarts waste nothing and the IDs are dense.
func TestCleanRestartWastesNothing(t *testing.T) {
	st := newMemStore()
	st.create("acct", 1000, 100, 10000)
	l := newLedger()
	file := filepath.Join(t.TempDir(), "seg.json")
	for i := range 10 {
		// A tiny MarkAhead keeps the mark a tenth of the step ahead, so the
		// state file lists ranges when Close begins.
		s, err := segment.New(segment.Config{Store: st, StateFile: file, MarkAhead: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		l.add(t, "run", take(t, s, "acct", 37+i*13))
		wasted, err := s.Close(context.Background())
		if err != nil || wasted != 0 {
			t.Fatalf("close %d: wasted %d, %v", i, wasted, err)
		}
		// R3: what went back to the store is no longer in the state file.
		data, err := os.ReadFile(file)
		if err != nil || strings.Contains(string(data), "acct") {
			t.Fatalf("state file after a clean stop: %s %v; want no range of the tag", data, err)
		}
	}
	n, lo, hi := l.span()
	if lo != 1000 || hi-lo+1 != n {
		t.Fatalf("after 10 clean restarts: %d IDs over [%d,%d]: want dense from 1000", n, lo, hi)
	}
	if got := st.maxID("acct") - 1000 - st.returnedTotal("acct"); got != n {
		t.Fatalf("max_id - start - returned = %d, issued %d: something was lost", got, n)
	}
	// Drain what was given back: none of it was issued before.
	drainer := newService(t, segment.Config{Store: st})
	l.add(t, "drain", take(t, drainer, "acct", int(st.returnedTotal("acct"))))
}

// kill -9: a restart on the same disk resumes after the persisted mark,
// so it reissues nothing and loses exactly the IDs between the last issued
// and the mark: at most one chunk (a tenth of the step, or MarkAhead's
// worth at the recent rate).
func TestCrashResumesAfterMark(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int
		markAhead time.Duration
		maxLost   int64 // a tenth of the step when MarkAhead is tiny
	}{
		{"crash early in a range", 3, time.Nanosecond, 100},
		{"crash mid range", 451, time.Nanosecond, 100},
		{"crash across ranges", 1733, time.Nanosecond, 100},
		{"crash mid range, rate-sized chunk", 451, 0, 1 << 40},
		{"crash across ranges, rate-sized chunk", 1733, 0, 1 << 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			st.create("inv", 1, 1000, 1000)
			file := filepath.Join(t.TempDir(), "seg.json")
			l := newLedger()
			s1, err := segment.New(segment.Config{Store: st, StateFile: file, Incarnation: "i1", MarkAhead: tc.markAhead})
			if err != nil {
				t.Fatal(err)
			}
			var last int64
			for range tc.n {
				ids := take(t, s1, "inv", 1)
				l.add(t, "before", ids)
				last = ids[0]
			}
			s1.Crash()
			before := s1.Status()[0]
			s2 := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "i1"})
			next := take(t, s2, "inv", 1)
			l.add(t, "after", next)
			lost := next[0] - last - 1
			t.Logf("last ID before the crash %d, first after %d: %d lost (mark ahead %d, chunk %d)", last, next[0], lost, before.Ahead, before.Chunk)
			if lost != before.Ahead || lost < 0 || lost > before.Chunk || lost > tc.maxLost {
				t.Fatalf("lost %d; want exactly the mark's lead %d, at most the chunk %d and %d", lost, before.Ahead, before.Chunk, tc.maxLost)
			}
		})
	}
}

// A state file from another ZooKeeper incarnation is dropped, not resumed.
func TestStateFileOfOtherIncarnationIsDropped(t *testing.T) {
	st := newMemStore()
	st.create("x", 1, 100, 100)
	file := filepath.Join(t.TempDir(), "seg.json")
	s1, err := segment.New(segment.Config{Store: st, StateFile: file, Incarnation: "old"})
	if err != nil {
		t.Fatal(err)
	}
	take(t, s1, "x", 5)
	s1.Crash()
	s2 := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "new"})
	if ids := take(t, s2, "x", 1); ids[0] < 101 {
		t.Fatalf("first ID %d after an incarnation change: the old range [1,101) was resumed", ids[0])
	}
	// Stopped first: a running service writes the file (its mark), and
	// could put valid JSON back over the corrupt file below.
	if _, err := s2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := segment.New(segment.Config{Store: st, StateFile: file}); err == nil {
		t.Fatal("a corrupt state file was accepted")
	}
}

// A clean stop that cannot reach the store (retrying until its context
// ends) loses the ranges it holds: they left the state file first (R3), so
// they are counted as waste and never reissued. What it holds is the rest
// of the first range, 90 IDs, and the next range if the background load
// after the first IDs got it before the store went down: every ID the
// store handed out and the service did not issue.
func TestCloseWithStoreDownCountsWaste(t *testing.T) {
	st := newMemStore()
	st.create("y", 1, 100, 100)
	file := filepath.Join(t.TempDir(), "seg.json")
	s1, err := segment.New(segment.Config{Store: st, StateFile: file})
	if err != nil {
		t.Fatal(err)
	}
	take(t, s1, "y", 10)
	st.setDown(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond) // Close retries until then
	defer cancel()
	wasted, err := s1.Close(ctx)
	handedOut := st.maxID("y") // one past the last ID of the ranges the store gave out
	if want := handedOut - 11; err == nil || wasted != want || want != 90 && want != 190 {
		t.Fatalf("close with the store down: wasted %d, err %v; want %d (IDs 11 to %d) and an error", wasted, err, want, handedOut-1)
	}
	st.setDown(false)
	s2 := newService(t, segment.Config{Store: st, StateFile: file})
	if ids := take(t, s2, "y", 1); ids[0] < handedOut {
		t.Fatalf("ID %d reissued from a range that was neither returned nor kept", ids[0])
	}
}

// The step doubles while ranges last under LongRange/2 and halves when
// one lasts longer, between the base and the max step (Leaf's 15/30 min).
func TestNextStep(t *testing.T) {
	const long = 30 * time.Minute
	for _, tc := range []struct {
		step, base, top int64
		lasted          time.Duration
		want            int64
	}{
		{1000, 1000, 8000, time.Minute, 2000},
		{4000, 1000, 8000, 14 * time.Minute, 8000},
		{8000, 1000, 8000, time.Second, 8000}, // at the max
		{8000, 1000, 8000, 20 * time.Minute, 8000},
		{8000, 1000, 8000, 31 * time.Minute, 4000},
		{1000, 1000, 8000, 2 * time.Hour, 1000}, // at the base
		{5000, 1000, 8000, 15 * time.Minute, 5000},
		{5000, 1000, 8000, 30 * time.Minute, 5000},
	} {
		if got := segment.NextStep(tc.step, tc.base, tc.top, tc.lasted, long); got != tc.want {
			t.Errorf("NextStep(%d, base %d, max %d, lasted %v) = %d, want %d", tc.step, tc.base, tc.top, tc.lasted, got, tc.want)
		}
	}
}

// Under load (ranges lasting far under 15 minutes) the loads ask for a
// doubling step until the tag's max step.
func TestStepGrowsUnderLoad(t *testing.T) {
	st := newMemStore()
	st.create("s", 1, 10, 80)
	s := newService(t, segment.Config{Store: st})
	for range 400 {
		take(t, s, "s", 1)
	}
	st.mu.Lock()
	steps := slices.Clone(st.steps)
	st.mu.Unlock()
	want := []int64{10, 20, 40, 80, 80}
	if len(steps) < len(want) || !slices.Equal(steps[:len(want)], want) {
		t.Fatalf("steps asked for %v, want them to start %v", steps, want)
	}
}

// Errors: an unknown tag, a bad tag, a store that is down (after Wait).
func TestTakeErrors(t *testing.T) {
	st := newMemStore()
	st.create("ok", 1, 10, 10)
	s := newService(t, segment.Config{Store: st, Wait: time.Second})
	if _, err := s.Take(context.Background(), "nope", nil, 1); !errors.Is(err, segment.ErrUnknownTag) {
		t.Errorf("unknown tag: %v", err)
	}
	if _, err := s.Take(context.Background(), "a/b", nil, 1); !errors.Is(err, segment.ErrInvalidTag) {
		t.Errorf("bad tag: %v", err)
	}
	if _, err := s.Take(context.Background(), "ok", nil, 0); err == nil {
		t.Error("take 0: no error")
	}
	take(t, s, "ok", 10) // the first range, all of it
	st.setDown(true)
	for range 3 { // whatever was loaded ahead, it runs out
		if _, err := s.Take(context.Background(), "ok", nil, 10); err != nil {
			if !errors.Is(err, segment.ErrUnavailable) {
				t.Fatalf("store down: %v, want ErrUnavailable", err)
			}
			st.setDown(false)
			take(t, s, "ok", 1) // and it recovers by itself
			return
		}
	}
	t.Fatal("the store was down, yet the service never ran out")
}

func TestValidateTag(t *testing.T) {
	for _, tc := range []struct {
		tag string
		ok  bool
	}{
		{"orders", true}, {"user-ids_2", true}, {"账号", true},
		{"", false}, {".", false}, {"..", false}, {"a/b", false}, {"a b", false}, {"a?b", false},
		{string(make([]byte, segment.MaxTagLen+1)), false}, {"tab\there", false}, {"\xff", false},
	} {
		if err := segment.ValidateTag(tc.tag); (err == nil) != tc.ok {
			t.Errorf("ValidateTag(%q) = %v, want ok %v", tc.tag, err, tc.ok)
		}
	}
}

// After a warm-up at a steady rate, a burst at 20 times that rate is served
// from the buffers without a Take ever waiting for a load: the step grew
// while ranges were short-lived, and the next range loads at 10% used.
func TestBurstAfterWarmUpDoesNotStall(t *testing.T) {
	// In virtual time (and on an in-memory disk): the test is about the
	// buffers and the step, and a busy machine's scheduler or fsync must
	// not decide it.
	synctest.Test(t, func(t *testing.T) {
		st := newMemStore()
		st.create("burst", 1, 100, 100_000)
		st.latency = 5 * time.Millisecond // a ZooKeeper round trip, generously
		s := newService(t, segment.Config{Store: st, StateFile: "/data/seg.json", Disk: disk.NewMem().Process(), MarkAhead: time.Second})
		l := newLedger()
		run := func(perMilli, millis int) {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			for range millis {
				<-tick.C
				l.add(t, "run", take(t, s, "burst", perMilli))
			}
		}
		run(2, 1000) // warm-up: 2,000 IDs/s for 1s
		before := s.Stalls()
		run(40, 500) // burst: 20x
		stalls := s.Stalls() - before
		n, _, _ := l.span()
		t.Logf("%d IDs, %d range loads, step now %d, stalls during the burst %d (during warm-up %d)", n, st.allocCount(), s.Status()[0].Step, stalls, before)
		if stalls != 0 {
			t.Fatalf("%d Takes waited for a load during the burst", stalls)
		}
	})
}

// With ZooKeeper unreachable, the IDs already in memory stay issuable: the
// mark keeps moving on the local disk although every range load fails.
func TestStoreDownKeepsServingWhatIsHeld(t *testing.T) {
	st := newMemStore()
	st.create("held", 1, 1000, 1000)
	s := newService(t, segment.Config{Store: st, StateFile: filepath.Join(t.TempDir(), "seg.json"),
		MarkAhead: time.Nanosecond, Wait: 5 * time.Second}) // the first load: bounded, never tight (a loaded machine)
	take(t, s, "held", 1) // the first range [1,1001) is in memory
	st.setDown(true)
	for i := range 900 {
		if _, err := s.Take(context.Background(), "held", nil, 1); err != nil {
			t.Fatalf("take %d of the range in memory with the store down: %v", i, err)
		}
	}
}

// A stop while the store is unreachable (Abandon) keeps the ranges in the
// state file with the exact position: the next start resumes right after
// the last ID issued, nothing lost, nothing reissued.
func TestAbandonResumesExactly(t *testing.T) {
	st := newMemStore()
	st.create("a", 1, 1000, 1000)
	file := filepath.Join(t.TempDir(), "seg.json")
	s1, err := segment.New(segment.Config{Store: st, StateFile: file, Incarnation: "i"})
	if err != nil {
		t.Fatal(err)
	}
	ids := take(t, s1, "a", 123)
	st.setDown(true)
	if err := s1.Abandon(); err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Take(context.Background(), "a", nil, 1); !errors.Is(err, segment.ErrClosed) {
		t.Fatalf("take after Abandon: %v, want ErrClosed", err)
	}
	s2 := newService(t, segment.Config{Store: st, StateFile: file, Incarnation: "i"})
	if next := take(t, s2, "a", 1); next[0] != ids[len(ids)-1]+1 {
		t.Fatalf("first ID after Abandon and restart %d, want %d", next[0], ids[len(ids)-1]+1)
	}
	st.setDown(false)
}

// Requests for a tag that does not exist read the store once per
// UnknownTagTTL, not once each; a tag created meanwhile is found after it.
func TestUnknownTagIsRemembered(t *testing.T) {
	st := newMemStore()
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s := newService(t, segment.Config{Store: st, Now: clock})
	for range 50 {
		if _, err := s.Take(context.Background(), "later", nil, 1); !errors.Is(err, segment.ErrUnknownTag) {
			t.Fatalf("unknown tag: %v", err)
		}
	}
	st.mu.Lock()
	reads := st.tagReads
	st.mu.Unlock()
	if reads != 1 {
		t.Fatalf("50 requests for an unknown tag read the store %d times, want 1", reads)
	}
	st.create("later", 1, 10, 10)
	if _, err := s.Take(context.Background(), "later", nil, 1); !errors.Is(err, segment.ErrUnknownTag) {
		t.Fatalf("within the TTL: %v, want the remembered ErrUnknownTag", err)
	}
	mu.Lock()
	now = now.Add(segment.UnknownTagTTL + time.Millisecond)
	mu.Unlock()
	take(t, s, "later", 1)
}

// hangingStore is a store whose allocations (hangAlloc) or holder records
// (hangPublish) hang, while set, until released: a ZooKeeper that answers
// nothing. entered is closed when the first hanging call starts.
type hangingStore struct {
	*memStore
	hangAlloc, hangPublish atomic.Bool
	entered                chan struct{}
	once                   sync.Once
	release                chan struct{}
}

func newHangingStore() *hangingStore {
	return &hangingStore{memStore: newMemStore(), entered: make(chan struct{}), release: make(chan struct{})}
}

// hang blocks while on is set, until released or ctx ends.
func (h *hangingStore) hang(ctx context.Context, on *atomic.Bool) error {
	if !on.Load() {
		return nil
	}
	h.once.Do(func() { close(h.entered) })
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *hangingStore) Alloc(ctx context.Context, tag string, inc, step, above int64) (segment.Range, segment.Tag, error) {
	if err := h.hang(ctx, &h.hangAlloc); err != nil {
		return segment.Range{}, segment.Tag{}, err
	}
	return h.memStore.Alloc(ctx, tag, inc, step, above)
}

func (h *hangingStore) Publish(ctx context.Context, tag, holder string, held []segment.Range) error {
	if err := h.hang(ctx, &h.hangPublish); err != nil {
		return err
	}
	return h.memStore.Publish(ctx, tag, holder, held)
}

// A range is in the state file as soon as it is allocated, before the
// holder record (which can hang for LoadTimeout): a kill -9 in between
// resumes it. It used to be written after the holder record, so a crash
// there lost the whole range, not the documented one chunk, and Takes
// waited on ZooKeeper for IDs already in memory.
func TestLoadPersistsTheRangeBeforePublishing(t *testing.T) {
	st := newHangingStore()
	st.hangPublish.Store(true)
	st.create("t", 1, 100, 100)
	file := filepath.Join(t.TempDir(), "seg.json")
	s := newService(t, segment.Config{Store: st, StateFile: file, Holder: "n"})
	t.Cleanup(func() { close(st.release) })
	got := make(chan error, 1)
	go func() {
		_, err := s.Take(context.Background(), "t", nil, 1)
		got <- err
	}()
	select {
	case <-st.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the range was never published")
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `"t":{"incarnation":`) || !strings.Contains(string(b), `"ranges":[{"lo":`) {
		t.Fatalf("state file while the holder record hangs: %q (%v); want the new range listed", b, err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Take while the holder record hangs: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Take waited on the holder record for an ID in memory")
	}
}

// A ZooKeeper that hangs never stops the IDs a node already holds: the
// mark moves on the disk while a load waits on ZooKeeper. One worker used
// to do both, so while an Alloc hung (up to LoadTimeout) the mark stood
// still and Takes got 503 after the first chunk of a range in memory.
func TestHungStoreKeepsServingWhatIsHeld(t *testing.T) {
	st := newHangingStore()
	st.create("t", 1, 1000, 1000)
	s := newService(t, segment.Config{Store: st, StateFile: filepath.Join(t.TempDir(), "seg.json"), Holder: "n",
		Wait: 2 * time.Second, LoadTimeout: time.Minute})
	t.Cleanup(func() { close(st.release) })
	take(t, s, "t", 1) // the first range, [1,1001)
	st.hangAlloc.Store(true)
	for i := range 900 { // 10% used: a load starts and hangs; the marks go on
		if _, err := s.Take(context.Background(), "t", nil, 1); err != nil {
			t.Fatalf("take %d of the range in memory while ZooKeeper hangs: %v", i+2, err)
		}
	}
}
