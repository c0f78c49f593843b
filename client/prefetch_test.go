package client

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Many callers drawing from the prefetch buffer at once, while refills
// land: every ID is handed out once, and far fewer requests are made
// than calls.
func TestPrefetchConcurrentCallersGetEachIDOnce(t *testing.T) {
	f := startFake(t, 1, nil)
	c := newClient(t, Config{Servers: []string{f.addr}, Prefetch: 1000, MaxBatch: 250})
	const goroutines, each = 32, 500
	got := callConcurrently(t, goroutines, each, func(int) (int64, error) { return c.Next(context.Background()) })
	all := slices.Concat(got...)
	slices.Sort(all)
	if n := len(slices.Compact(all)); n != goroutines*each {
		t.Fatalf("%d distinct IDs of %d handed out", n, goroutines*each)
	}
	if r := f.requests.Load(); r > goroutines*each/20 {
		t.Fatalf("%d requests for %d calls with prefetch", r, goroutines*each)
	}
	if st := c.Stats(); st.IDs != goroutines*each {
		t.Fatalf("stats %+v: IDs handed out %d", st, goroutines*each)
	}
}

// warmBuffer is a client whose prefetch buffer holds n IDs and never
// refills: what is measured is the buffer alone.
func warmBuffer(b *testing.B, n int) *Client {
	b.Helper()
	c := &Client{cfg: Config{PrefetchMaxAge: time.Hour}, stop: make(chan struct{})}
	c.pre = &prefetch{c: c, want: 0, maxAge: time.Hour, kick: make(chan struct{}, 1), arrived: make(chan struct{})}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	c.pre.cur.Store(&chunk{ids: ids, born: time.Now()})
	return c
}

// BenchmarkNextFromBuffer: the cost of a Next served by a warm prefetch
// buffer, one caller and many.
func BenchmarkNextFromBuffer(b *testing.B) {
	b.Run("callers=1", func(b *testing.B) {
		c := warmBuffer(b, b.N)
		ctx := context.Background()
		b.ResetTimer()
		for range b.N {
			if _, err := c.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("callers=64", func(b *testing.B) {
		c := warmBuffer(b, b.N)
		ctx := context.Background()
		b.SetParallelism(32)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Next(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
