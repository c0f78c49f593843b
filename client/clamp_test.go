package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// limitTo is a behaviour that refuses a count above limit as snowflaked
// does (400 invalid_count, with "max" when reportMax), and otherwise
// leaves the answer to next (nil: the fake's IDs).
func limitTo(limit int, reportMax bool, next func(http.ResponseWriter, *http.Request, int) bool) func(http.ResponseWriter, *http.Request, int) bool {
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		if n > limit {
			maxField := ""
			if reportMax {
				maxField = fmt.Sprintf(`,"max":%d`, limit)
			}
			writeBody(w, 400, fmt.Sprintf(`{"error":{"code":"invalid_count","message":"count \"%d\" is not a whole number from 1 to %d"%s}}`, n, limit, maxField))
			return true
		}
		return next != nil && next(w, r, n)
	}
}

// A MaxBatch above what the node accepts: the client learns the node's
// limit from its refusal and asks again in requests of at most that,
// instead of failing the call; later calls ask within the limit at once.
func TestMaxBatchClampedToTheNodes(t *testing.T) {
	const limit, n = 100, 250
	tests := []struct {
		name string
		call func(ctx context.Context, c *Client) (int, error) // how many increasing values it got
	}{
		{"NextN", func(ctx context.Context, c *Client) (int, error) {
			ids, err := c.NextN(ctx, n)
			return increasingInts(ids), err
		}},
		{"NextSegmentN", func(ctx context.Context, c *Client) (int, error) {
			ids, err := c.NextSegmentN(ctx, "orders", n)
			return increasingInts(ids), err
		}},
		{"NextGeneN", func(ctx context.Context, c *Client) (int, error) {
			ids, err := c.NextGeneN(ctx, 5, n)
			return increasingInts(ids), err
		}},
		{"NextUUIDN", func(ctx context.Context, c *Client) (int, error) {
			us, err := c.NextUUIDN(ctx, n)
			if !slices.IsSortedFunc(us, func(a, b UUID) int { return bytes.Compare(a[:], b[:]) }) {
				return 0, err
			}
			return len(us), err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, 1, limitTo(limit, true, uuidAnswer(nil)))
			c := newClient(t, Config{Servers: []string{f.addr}, MaxBatch: 1000})
			for i := range 3 {
				got, err := tc.call(context.Background(), c)
				if err != nil || got != n {
					t.Fatalf("call %d: %d increasing values, %v; want %d", i, got, err, n)
				}
			}
			if r := f.requestsFor(n); r != 1 {
				t.Errorf("%d requests for %d: want 1, the refusal that taught the limit", r, n)
			}
			if r := f.requestsFor(limit); r != 6 {
				t.Errorf("%d requests for %d, want 6 (3 calls, 2 each)", r, limit)
			}
			if r := f.requestsFor(n - 2*limit); r != 3 {
				t.Errorf("%d requests for %d, want 3", r, n-2*limit)
			}
			if st := c.Stats(); st.Errors != 0 || st.IDs != 3*n {
				t.Errorf("stats %+v: want no errors and %d IDs", st, 3*n)
			}
		})
	}
}

// Nodes with different limits: the client keeps the smallest; a node that
// does not report its limit (an older node) fails the call as before.
func TestMaxBatchClampLimits(t *testing.T) {
	t.Run("smallest of two", func(t *testing.T) {
		a := startFake(t, 1, limitTo(100, true, nil))
		b := startFake(t, 2, limitTo(40, true, nil))
		c := newClient(t, Config{Servers: []string{a.addr, b.addr}, MaxBatch: 1000})
		for i := range 4 {
			ids, err := c.NextN(context.Background(), 250)
			if err != nil || increasingInts(ids) != 250 {
				t.Fatalf("call %d: %d increasing IDs, %v", i, increasingInts(ids), err)
			}
		}
		if got := c.nodeMax.Load(); got != 40 {
			t.Fatalf("limit %d, want 40", got)
		}
	})
	t.Run("not reported", func(t *testing.T) {
		f := startFake(t, 1, limitTo(100, false, nil))
		c := newClient(t, Config{Servers: []string{f.addr}, MaxBatch: 1000})
		_, err := c.NextN(context.Background(), 250)
		var rej *RejectedError
		if !errors.As(err, &rej) || rej.Code != wire.CodeInvalidCount || rej.Max != 0 {
			t.Fatalf("NextN(250) from a node that does not report its limit: %v; want ErrRejected invalid_count", err)
		}
	})
	t.Run("prefetch", func(t *testing.T) {
		f := startFake(t, 1, limitTo(100, true, nil))
		c := newClient(t, Config{Servers: []string{f.addr}, MaxBatch: 1000, Prefetch: 4000})
		seen := map[int64]bool{}
		for i := range 3000 {
			id, err := c.Next(context.Background())
			if err != nil || seen[id] {
				t.Fatalf("Next %d: %d, %v (seen before: %v)", i, id, err, seen[id])
			}
			seen[id] = true
		}
		if f.requestsFor(100) == 0 {
			t.Fatal("prefetch never asked within the node's limit")
		}
	})
}

// increasingInts is len(ids) when they increase, else 0.
func increasingInts(ids []int64) int {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return 0
		}
	}
	return len(ids)
}

// tagCeiling is a behaviour that refuses a segment count above ceiling as
// a tag created with --max-count does (400 invalid_count, "max" the
// node's --max-batch, "tag_max" the ceiling), holding the first request
// until release closes so that callers pile up behind it.
func tagCeiling(ceiling, maxBatch int, release <-chan struct{}) func(http.ResponseWriter, *http.Request, int) bool {
	var first atomic.Bool
	return func(w http.ResponseWriter, r *http.Request, n int) bool {
		if first.CompareAndSwap(false, true) {
			select {
			case <-release:
			case <-r.Context().Done():
				return true
			}
		}
		if n > ceiling && strings.HasPrefix(r.URL.Path, "/segment/") {
			writeBody(w, 400, fmt.Sprintf(`{"error":{"code":"invalid_count","message":"tag \"orders\": count above the tag's max count: %d IDs asked, at most %d per request","max":%d,"tag_max":%d}}`, n, ceiling, maxBatch, ceiling))
			return true
		}
		return false
	}
}

// A tag's ceiling (--max-count) bounds one request, not the callers a
// client merges: callers of one ID each, merged beyond it, all get their
// IDs (the batch is asked for in parts, and later batches stay within
// the ceiling), and one caller asking for more than the ceiling is
// refused, never split.
func TestTagCeilingBoundsMergedCallers(t *testing.T) {
	const ceiling, callers = 10, 30
	release := make(chan struct{})
	f := startFake(t, 1, tagCeiling(ceiling, 1000, release))
	c := newClient(t, Config{Servers: []string{f.addr}, MaxBatch: 1000})
	var wg sync.WaitGroup
	errs := make(chan error, callers+1)
	ids := make(chan int64, callers+1)
	for range callers + 1 { // the first holds the only slot; the others merge behind it
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := c.NextSegment(context.Background(), "orders")
			errs <- err
			ids <- id
		}()
	}
	eventually(t, "the first request reaches the node", func() bool { return f.requests.Load() > 0 })
	eventually(t, "the callers queue behind it", func() bool { return c.segs["orders"].waiting() >= callers })
	close(release)
	wg.Wait()
	close(errs)
	close(ids)
	for err := range errs {
		if err != nil {
			t.Fatalf("a one-ID call failed: %v", err)
		}
	}
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("ID %d twice", id)
		}
		seen[id] = true
	}
	for n := ceiling + 1; n <= callers; n++ {
		if r := f.requestsFor(n); r > 1 {
			t.Errorf("%d requests for %d, above the ceiling %d: want at most the one that taught it", r, n, ceiling)
		}
	}
	before := f.requests.Load()
	_, err := c.NextSegmentN(context.Background(), "orders", ceiling+5)
	var rej *RejectedError
	if !errors.As(err, &rej) || rej.Code != wire.CodeInvalidCount || rej.TagMax != ceiling {
		t.Fatalf("NextSegmentN(%d) on a tag of ceiling %d: %v, want RejectedError invalid_count with TagMax %d", ceiling+5, ceiling, err, ceiling)
	}
	if f.requests.Load() != before {
		t.Errorf("the refused call sent %d requests: one caller above the ceiling is refused, not split", f.requests.Load()-before)
	}
	if ids, err := c.NextN(context.Background(), 50); err != nil || len(ids) != 50 || f.requestsFor(50) != 1 {
		t.Errorf("snowflake IDs after learning a tag's ceiling: %d IDs, %v, %d requests for 50: a tag's ceiling is the tag's alone", len(ids), err, f.requestsFor(50))
	}
}
