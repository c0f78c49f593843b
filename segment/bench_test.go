package segment_test

import (
	"context"
	"path/filepath"
	"testing"

	"codeberg.org/snowflaked/snowflaked/segment"
)

// BenchmarkTake: in-process take of one ID from the buffer, with the state
// file on disk as a node runs it (base step 1000, max 1,000,000: Leaf's
// defaults). zk-writes/M-IDs counts the store's writes (range loads and
// holder records) per million IDs: at this rate ranges last far under 15
// minutes, so the step grows to its max and loads become rare.
func BenchmarkTake(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(map[int]string{1: "count=1", 100: "count=100"}[n], func(b *testing.B) {
			st := newMemStore()
			st.create("bench", 1, 1000, 1_000_000)
			s, err := segment.New(segment.Config{Store: st, StateFile: filepath.Join(b.TempDir(), "seg.json")})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			ctx := context.Background()
			buf := make([]int64, 0, n)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if buf, err = s.Take(ctx, "bench", buf[:0], n); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			ids := float64(b.N) * float64(n)
			b.ReportMetric(b.Elapsed().Seconds()*1e9/ids, "ns/ID")
			st.mu.Lock()
			writes := st.allocs + st.publishes
			st.mu.Unlock()
			b.ReportMetric(float64(writes)/ids*1e6, "zk-writes/M-IDs")
		})
	}
}
