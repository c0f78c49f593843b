package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/clock/clocktest"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
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
		if err := recycleManyAtOnce(t); err != nil {
			t.Fatal(err)
		}
	})
}

// recycleManyAtOnce runs the scenario of
// TestRecyclingManyAtOnceCostsAboutOneScanEach in a bubble and says what
// went wrong.
func recycleManyAtOnce(t *testing.T) error {
	t.Helper()
	const ids, old, fresh = 64, 64, 48
	w := newRecycleWorld(snowflake.Layout{TimeBits: 41, WorkerBits: 6, SequenceBits: 16, Epoch: snowflake.DefaultEpoch, Unit: time.Millisecond})
	srv, clk, pass := w.srv, w.clk, w.pass
	cfgFor := func(key string) Config { return w.config(t, key) }
	fences := map[int64]int64{}
	for i := range old {
		c := newCoord(t, cfgFor(fmt.Sprintf("old-%02d", i)))
		id := mustClaim(t, c)
		fence := int64(snowflake.UnixMilliNow(clk)) + int64(i)
		if err := c.Close(context.Background(), snowflake.UnixMilli(fence)); err != nil {
			return err
		}
		fences[id.WorkerID] = fence
	}
	if len(fences) != ids {
		return fmt.Errorf("%d distinct worker IDs among %d old keys, want %d", len(fences), old, ids)
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
			return fmt.Errorf("new-%02d: %w", i, errs[i])
		case !id.Recycled || seen[id.WorkerID]:
			return fmt.Errorf("new-%02d: %+v: want a recycled worker ID no other new key has", i, id)
		case id.PrevFence < snowflake.UnixMilli(fences[id.WorkerID]):
			return fmt.Errorf("new-%02d took worker ID %d with prev_fence %d below its owner's fence %d", i, id.WorkerID, id.PrevFence, fences[id.WorkerID])
		}
		seen[id.WorkerID] = true
	}
	reads := counts["get"] + counts["exists"] + counts["children"]
	t.Logf("%d keys recycled at once: %d reads (%.0f per key), %d multis, %v", fresh, reads, float64(reads)/fresh, counts["multi"], counts)
	if reads > recycleReadsPerKey*fresh {
		return fmt.Errorf("recycling cost %d reads, %.0f per key: want at most %d per key", reads, float64(reads)/fresh, recycleReadsPerKey)
	}

	// The evicted owners' znodes are dead once recycle-after passes again:
	// the next take-overs reap them, a bounded number each, and take the
	// old keys' IDs nobody recycled yet, after their fences.
	pass(2 * time.Minute)
	const dir = "/snowflaked/test/forever"
	holders := map[string]int64{} // forever znodes that hold a worker ID now
	for _, name := range srv.Children(dir) {
		b, _, _ := srv.Get(dir + "/" + name)
		key, seq, err := parseForeverName(name)
		if err != nil {
			return err
		}
		if _, w, err := decodeForever(b, key, seq, WorkerRange{0, ids - 1}); err == nil && w != noWorker {
			holders[dir+"/"+name] = w
		}
	}
	before := len(srv.Children(dir))
	for i := range 4 {
		c := newCoord(t, cfgFor(fmt.Sprintf("later-%d", i)))
		id := mustClaim(t, c)
		if !id.Recycled || id.PrevFence < snowflake.UnixMilli(fences[id.WorkerID]) {
			return fmt.Errorf("later-%d took worker ID %d (recycled %v) with prev_fence %d below its owner's fence %d", i, id.WorkerID, id.Recycled, id.PrevFence, fences[id.WorkerID])
		}
	}
	for path, w := range holders {
		if _, _, ok := srv.Get(path); !ok {
			return fmt.Errorf("forever znode %s, which held worker ID %d, was reaped: its fence is lost", path, w)
		}
	}
	after := len(srv.Children(dir))
	// Each later key adds its znode and reaps up to reapPerRecycle.
	if want := before + 4 - 4*reapPerRecycle; after != want {
		return fmt.Errorf("forever znodes %d → %d after 4 take-overs, want %d (each reaps %d)", before, after, want, reapPerRecycle)
	}
	return nil
}

// A take-over of a worker ID some forever znode names, computed from a scan
// another take-over of that ID overtook, fails on the evicted owner's
// version, even once the winner's lease is gone: recyclers of one ID
// serialize there, with no version every recycler shares.
func TestRecycleFromOutdatedScanOfANamedIDFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if err := recycleFromOutdatedScanOfANamedID(t); err != nil {
			t.Fatal(err)
		}
	})
}

// recycleFromOutdatedScanOfANamedID runs the scenario of
// TestRecycleFromOutdatedScanOfANamedIDFails in a bubble.
func recycleFromOutdatedScanOfANamedID(t *testing.T) error {
	t.Helper()
	ctx := context.Background()
	w := newRecycleWorld(smallLayout())
	clk := w.clk
	cfgFor := func(key string) Config { return w.config(t, key) }
	for i := range 4 {
		c := newCoord(t, cfgFor(fmt.Sprintf("old-%d", i)))
		mustClaim(t, c)
		if err := c.Close(ctx, snowflake.UnixMilliNow(clk)); err != nil {
			return err
		}
	}
	w.pass(2 * time.Minute)

	// A scans...
	a := newCoord(t, cfgFor("a"))
	conn, err := a.connect(ctx)
	if err != nil {
		return err
	}
	z := zkclient.Client{Conn: conn, Timeout: 5 * time.Second}
	own, err := a.findOrCreateForever(ctx, z, 0)
	if err != nil {
		return err
	}
	s, err := a.scanCluster(ctx, z)
	if err != nil {
		return err
	}
	// ...B takes a worker ID over and stops (its lease is gone)...
	b := newCoord(t, cfgFor("b"))
	bid := mustClaim(t, b)
	if err := b.Close(ctx, snowflake.UnixMilliNow(clk)); err != nil {
		return err
	}
	if len(s.claimers[bid.WorkerID]) == 0 {
		return fmt.Errorf("a's scan has no owner of worker ID %d", bid.WorkerID)
	}
	// ...and A's take-over of the same ID from its outdated scan fails.
	ops, _, _, _, err := a.recycleOps(s, s.byPath[own.path], bid.WorkerID, snowflake.UnixMilliNow(clk), zkclient.NewToken())
	if err != nil {
		return err
	}
	if _, err := z.Multi(ctx, ops...); err == nil {
		return fmt.Errorf("two forever znodes name worker ID %d: %s and %s", bid.WorkerID, bid.Path, own.path)
	} else if !errors.Is(err, zk.ErrBadVersion) {
		return fmt.Errorf("take-over from an outdated scan: %w; want ErrBadVersion on the evicted owner", err)
	}
	return nil
}

// recycleWorld is an in-memory ZooKeeper and a clock for coordinators that
// recycle in a synctest bubble: recycle-after is a minute, and every
// client's requests carry its node key as label (zkmem.Request.Client).
type recycleWorld struct {
	srv    *zkmem.Server
	clk    *clocktest.Fake
	layout snowflake.Layout
}

func newRecycleWorld(layout snowflake.Layout) *recycleWorld {
	// The bubble starts in 2000, before the layout's epoch: the nodes'
	// clock starts after it.
	return &recycleWorld{srv: zkmem.New(), clk: clocktest.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), layout: layout}
}

// pass moves virtual time (timers) and the nodes' clock on together.
func (w *recycleWorld) pass(d time.Duration) {
	time.Sleep(d)
	w.clk.Advance(d)
}

// config is node key's coordinator config in w.
func (w *recycleWorld) config(t *testing.T, key string) Config {
	t.Helper()
	cfg := testConfig(t, []string{"127.0.0.1:2181"}, key)
	cfg.Dial = func(_ []string, opt zkconn.Options) (zkconn.Conn, error) {
		c := w.srv.Connect(opt)
		c.SetLabel(key)
		return c, nil
	}
	cfg.Layout = w.layout
	cfg.RecycleAfter = time.Minute
	cfg.Clock = w.clk
	return cfg
}
