package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/zkmem"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// recycleReadsPerKey bounds the ZooKeeper reads (get, exists, children)
// one recycling node key may cost when many recycle at once: a scan reads
// every forever znode once, so this allows about two scans of the test's
// 112 znodes. Recyclers contend per worker ID, not on one version: a lost
// ID is followed by the next free ID of the same scan.
const recycleReadsPerKey = 300

// Many node keys that must all recycle at once each scan the forever
// znodes about once, and all end up with distinct worker IDs; then the
// evicted owners' znodes, once dead for recycle-after, are reaped by later
// take-overs (a bounded number each), and no fence is lost: every new
// holder's prev_fence is at least its evicted owner's fence.
func TestRecyclingManyAtOnceCostsAboutOneScanEach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ids, old, fresh = 64, 64, 48
		srv := zkmem.New()
		clk := clocktest.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) // after the epoch; the bubble starts in 2000
		// pass moves virtual time (timers) and the nodes' clock on together.
		pass := func(d time.Duration) {
			time.Sleep(d)
			clk.Advance(d)
		}
		cfgFor := func(key string) Config {
			cfg := testConfig(t, []string{"127.0.0.1:2181"}, key)
			cfg.Dial = srv.Dial
			cfg.Layout = snowflake.Layout{TimeBits: 41, WorkerBits: 6, SequenceBits: 16, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond}
			cfg.RecycleAfter = time.Minute
			cfg.Clock = clk
			return cfg
		}
		fences := map[int64]int64{}
		for i := range old {
			c := newCoord(t, cfgFor(fmt.Sprintf("old-%02d", i)))
			id := mustClaim(t, c)
			fence := clock.UnixMilli(clk) + int64(i)
			if err := c.Close(context.Background(), fence); err != nil {
				t.Fatal(err)
			}
			fences[id.WorkerID] = fence
		}
		if len(fences) != ids {
			t.Fatalf("%d distinct worker IDs among %d old keys, want %d", len(fences), old, ids)
		}
		pass(2 * time.Minute) // every old key is now past recycle-after

		ops := countOpsDelayed(srv, time.Millisecond) // concurrent scans overlap
		got := make([]Identity, fresh)
		errs := make([]error, fresh)
		var wg sync.WaitGroup
		for i := range fresh {
			c := newCoord(t, cfgFor(fmt.Sprintf("new-%02d", i)))
			wg.Go(func() { got[i], errs[i] = c.Claim(context.Background(), Prior{}) })
		}
		wg.Wait()
		counts := ops.take()
		srv.SetInjector(nil)
		seen := map[int64]bool{}
		for i, id := range got {
			switch {
			case errs[i] != nil:
				t.Fatalf("new-%02d: %v", i, errs[i])
			case !id.Recycled || seen[id.WorkerID]:
				t.Fatalf("new-%02d: %+v: want a recycled worker ID no other new key has", i, id)
			case id.PrevFence < fences[id.WorkerID]:
				t.Fatalf("new-%02d took worker ID %d with prev_fence %d below its owner's fence %d", i, id.WorkerID, id.PrevFence, fences[id.WorkerID])
			}
			seen[id.WorkerID] = true
		}
		reads := counts["get"] + counts["exists"] + counts["children"]
		t.Logf("%d keys recycled at once: %d reads (%.0f per key), %d multis, %v", fresh, reads, float64(reads)/fresh, counts["multi"], counts)
		if reads > recycleReadsPerKey*fresh {
			t.Fatalf("recycling cost %d reads, %.0f per key: want at most %d per key", reads, float64(reads)/fresh, recycleReadsPerKey)
		}

		// The evicted owners' znodes are dead once recycle-after passes
		// again: the next take-overs reap them, a bounded number each.
		pass(2 * time.Minute)
		before := len(srv.Children("/snowflaked/test/forever"))
		for i := range 4 {
			c := newCoord(t, cfgFor(fmt.Sprintf("later-%d", i)))
			id := mustClaim(t, c)
			if !id.Recycled || id.PrevFence < fences[id.WorkerID] {
				t.Fatalf("later-%d: %+v: want a recycle after its owner's fence %d", i, id, fences[id.WorkerID])
			}
		}
		after := len(srv.Children("/snowflaked/test/forever"))
		// Each later key adds its znode and reaps up to reapPerRecycle.
		if want := before + 4 - 4*reapPerRecycle; after != want {
			t.Fatalf("forever znodes %d → %d after 4 take-overs, want %d (each reaps %d)", before, after, want, reapPerRecycle)
		}
	})
}
