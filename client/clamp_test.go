package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
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
