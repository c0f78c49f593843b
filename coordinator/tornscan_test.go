package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// A recycler's scan is many reads, not one snapshot. R reads the forever
// znode of B (a key about to recycle: no worker ID yet); B then takes
// worker ID W over from its dead owner C and is cut off (its session
// expires, its lease goes; it keeps issuing up to its acknowledged fence);
// R then reads C (-1 by now). R's scan shows W named by nobody and not
// leased. R must not take W without B's fence: B's take-over set forever/,
// so R's take-over of an ID nobody names, checked against the version its
// scan began with, fails, and R scans again.
func TestRecycleInsideAScanIsSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if err := recycleInsideAScan(t); err != nil {
			t.Fatal(err)
		}
	})
}

// recycleInsideAScan runs the scenario of TestRecycleInsideAScanIsSeen in
// a bubble and says what went wrong.
func recycleInsideAScan(t *testing.T) error {
	t.Helper()
	ctx := context.Background()
	w := newRecycleWorld(smallLayout()) // worker IDs 0-3
	srv, clk, pass := w.srv, w.clk, w.pass
	cfgFor := func(key string) Config { return w.config(t, key) }
	// old-0..old-2 hold worker IDs 0-2 (leases stay); old-3 stops.
	for i := range 4 {
		c := newCoord(t, cfgFor(fmt.Sprintf("old-%d", i)))
		mustClaim(t, c)
		if i == 3 {
			if err := c.Close(ctx, snowflake.UnixMilliNow(clk)); err != nil {
				return err
			}
		}
	}
	pass(2 * time.Minute)
	// C recycles worker ID 3 and stops; later it is dead for recycle-after.
	cc := newCoord(t, cfgFor("c"))
	cid := mustClaim(t, cc)
	if err := cc.Close(ctx, snowflake.UnixMilliNow(clk)); err != nil {
		return err
	}
	pass(2 * time.Minute)
	// B's forever znode exists (no worker ID yet: its sequence is past the
	// worker bits), as for any key that is about to recycle.
	b := newCoord(t, cfgFor("b"))
	bconn, err := b.connect(ctx)
	if err != nil {
		return err
	}
	bnode, err := b.findOrCreateForever(ctx, zkclient.Client{Conn: bconn, Timeout: 5 * time.Second}, 0)
	if err != nil {
		return err
	}

	// R's scan: its read of C is slow (a large forever/, a slow server);
	// it read B before.
	inject, slowed := slowReadAfter(bnode.path, cid.Path)
	srv.SetInjector(inject)
	rc := newCoord(t, cfgFor("r"))
	var rid Identity
	var rerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rid, rerr = rc.Claim(ctx, Prior{})
	}()
	select {
	case <-slowed:
	case <-done:
		return fmt.Errorf("r claimed without reading C after B (rid %+v, err %v): scenario not reached", rid, rerr)
	}
	time.Sleep(100 * time.Millisecond) // r's reads queued before C's land (C's waits 500ms)
	// Meanwhile B claims: W=3 is the only free ID, named by C.
	bid := mustClaim(t, b)
	if bid.WorkerID != cid.WorkerID {
		return fmt.Errorf("b took %d, want %d", bid.WorkerID, cid.WorkerID)
	}
	// B is cut off; its session expires and its lease goes. A process cut
	// off keeps issuing up to its acknowledged fence (bid.ZKFence).
	srv.Expire(bconn.SessionID())
	<-done
	if rerr != nil {
		t.Logf("r: %v (a safe outcome: no worker ID free)", rerr)
		return nil
	}
	namers, err := namersOf(srv, "/snowflaked/test/forever", bid.WorkerID)
	if err != nil {
		return err
	}
	if rid.WorkerID == bid.WorkerID && rid.PrevFence < bid.ZKFence {
		return fmt.Errorf("two forever znodes name worker ID %d (%v): r took it with prev_fence %d, below b's acknowledged fence %d",
			rid.WorkerID, namers, rid.PrevFence, bid.ZKFence)
	}
	if len(namers) != 1 {
		return fmt.Errorf("two forever znodes name worker ID %d: %v", bid.WorkerID, namers)
	}
	return nil
}

// slowReadAfter is the injector of recycleInsideAScan: client r's scan
// reads first (the path of B's forever znode) and then slow (C's): that
// read waits 500ms, and slowed is closed when it starts. A scan that reads
// slow before first has its connection broken (same session), so that it
// starts again.
func slowReadAfter(first, slow string) (inject zkmem.Injector, slowed <-chan struct{}) {
	var mu sync.Mutex
	readFirst := false
	ch := make(chan struct{})
	armed := true
	return func(r zkmem.Request) zkmem.Fault {
		mu.Lock()
		defer mu.Unlock()
		if r.Client == "r" && r.Op == "children" {
			readFirst = false // a new scan
		}
		if r.Client != "r" || r.Op != "get" {
			return zkmem.Fault{}
		}
		if r.Path == first {
			readFirst = true
		}
		if armed && r.Path == slow && readFirst {
			armed = false
			close(ch)
			return zkmem.Fault{Delay: 500 * time.Millisecond}
		}
		if armed && r.Path == slow {
			// C came before B in this scan's request order: break the
			// connection (same session) so that the scan starts again.
			return zkmem.Fault{Kind: zkmem.Drop}
		}
		return zkmem.Fault{}
	}, ch
}

// namersOf lists the forever znodes in dir (of srv) whose data names
// worker ID w (of the worker IDs 0-3).
func namersOf(srv *zkmem.Server, dir string, w int64) ([]string, error) {
	var namers []string
	for _, name := range srv.Children(dir) {
		data, _, _ := srv.Get(dir + "/" + name)
		key, seq, err := parseForeverName(name)
		if err != nil {
			return nil, err
		}
		if _, got, err := decodeForever(data, key, seq, WorkerRange{0, 3}); err == nil && got == w {
			namers = append(namers, name)
		}
	}
	return namers, nil
}
