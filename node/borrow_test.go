package node

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/health"
)

// borrowLayout holds 64 IDs a millisecond, so that a load of a few dozen
// IDs a millisecond is a large share of the node's capacity.
const (
	borrowLayout = "41/10/6"
	borrowPerMs  = 64
)

// borrowResult is what one borrowRun saw.
type borrowResult struct {
	refused   int           // requests not answered 200
	exhausted int64         // transitions to borrow_exhausted
	ahead     time.Duration // the largest lead of the IDs over the clock
	issued    int
}

// borrowRun runs a standalone node with --rollback-policy borrow on an
// in-memory disk in virtual time: it asks for perMs IDs every millisecond,
// steps the clock back by rollback after a second, and goes on until the
// clock has caught up with the IDs and a second more. Every ID must be
// above the one before, and the node must be in service at the end.
func borrowRun(t *testing.T, fenceAhead time.Duration, perMs int, rollback time.Duration) (res borrowResult) {
	t.Helper()
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		// A microsecond a reading: a request that waits for the next tick
		// spins on the clock, which virtual time would never move for it.
		// (A few readings a millisecond: the clock runs fast by well under 1%.)
		clk := &simClock{origin: time.Now(), step: int64(time.Microsecond)}
		cfg := defaultConfig()
		cfg.Listen = "127.0.0.1:0"
		cfg.WorkerID = 1
		cfg.CacheFile = filepath.Join(dir, "cache.json")
		cfg.Layout = borrowLayout
		cfg.Epoch = "1999-12-01T00:00:00Z"
		cfg.FenceAhead = fenceAhead
		cfg.RollbackPolicy = rollbackBorrow
		cfg.seams = &seams{disk: disk.NewMem().Process()}
		ctx, cancel := context.WithCancel(context.Background())
		var nd *node
		built := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, withSeams(cfg, withClock(clk), withListener(fasthttputil.NewInmemoryListener()),
				withBuilt(func(n *node) { nd = n; close(built) })), zerolog.Nop())
		}()
		<-built
		for i := 0; !nd.guard.Ready(); i++ {
			if i > 1000 {
				t.Fatalf("not in service after 10s: %+v", nd.guard.Status())
			}
			time.Sleep(10 * time.Millisecond)
		}
		call, rc := requestLoop(nd, "/ids?count="+strconv.Itoa(perMs))
		var last int64
		ask := func() {
			call()
			if rc.Response.StatusCode() != fasthttp.StatusOK {
				res.refused++
				return
			}
			for _, f := range strings.Fields(string(rc.Response.Body())) {
				id, err := strconv.ParseInt(f, 10, 64)
				if err != nil || id <= last {
					t.Fatalf("ID %q after %d", f, last)
				}
				last = id
				res.issued++
			}
			res.ahead = max(res.ahead, nd.gen.Behind())
		}
		for range 1000 {
			ask()
			time.Sleep(time.Millisecond)
		}
		clk.off.Add(-int64(rollback))
		for i := 0; i < 1000 || nd.gen.Behind() > 0; i++ {
			if i > 10_000_000 {
				t.Fatal("the clock never caught up with the IDs")
			}
			ask()
			time.Sleep(time.Millisecond)
		}
		for range 1000 {
			ask()
			time.Sleep(time.Millisecond)
		}
		if !nd.guard.Ready() {
			t.Errorf("out of service after the clock caught up: %+v", nd.guard.Status())
		}
		res.exhausted = nd.guard.Transitions()[health.ReasonBorrowExhausted]
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		time.Sleep(time.Minute) // the HTTP server's idle-worker cleaner notices the stop
	})
	return res
}

// borrowBounds are the largest rollbacks a node borrows through without a
// refusal, by docs/operations.md#rollback-policy-borrow: at least
// H/rho with the fence's least lead H = 2/3 of --fence-ahead (it is renewed
// every third), at most A/rho; rho is the share of the capacity used.
func borrowBounds(fenceAhead time.Duration, perMs int) (low, high time.Duration) {
	rho := float64(perMs) / borrowPerMs
	return time.Duration(float64(fenceAhead) * 2 / 3 / rho), time.Duration(float64(fenceAhead) / rho)
}

// The formula's bounds hold on the node: a rollback below the low bound is
// served without a refusal; one well past the high bound ends in
// borrow_exhausted, and the node comes back by itself once the clock has
// caught up. Leaving service is then the only refusal: no ID twice, none
// backwards.
func TestBorrowHeadroomBounds(t *testing.T) {
	tests := []struct {
		fenceAhead time.Duration
		perMs      int
	}{
		{300 * time.Millisecond, 8},
		{300 * time.Millisecond, 32},
		{3 * time.Second, 32},
	}
	for _, tc := range tests {
		low, high := borrowBounds(tc.fenceAhead, tc.perMs)
		t.Run(fmt.Sprintf("fence-ahead %s, %d of %d a ms", tc.fenceAhead, tc.perMs, borrowPerMs), func(t *testing.T) {
			within := time.Duration(float64(low) * 0.9)
			if r := borrowRun(t, tc.fenceAhead, tc.perMs, within); r.refused != 0 || r.exhausted != 0 {
				t.Errorf("a %s rollback (below the low bound %s): %d refusals, %d borrow_exhausted", within, low, r.refused, r.exhausted)
			}
			beyond := time.Duration(float64(high) * 1.5)
			r := borrowRun(t, tc.fenceAhead, tc.perMs, beyond)
			if r.refused == 0 || r.exhausted == 0 {
				t.Errorf("a %s rollback (past the high bound %s): %d refusals, %d borrow_exhausted; want it used up", beyond, high, r.refused, r.exhausted)
			}
			t.Logf("%s rollback: no refusal; %s: %d refusals, back in service after", within, beyond, r.refused)
		})
	}
}

// TestBorrowHeadroomTable measures the largest rollback served without a
// refusal, to 2% (BORROW_TABLE=1 go test -run TestBorrowHeadroomTable -v
// ./node/), for the table in docs/operations.md.
func TestBorrowHeadroomTable(t *testing.T) {
	if os.Getenv("BORROW_TABLE") == "" {
		t.Skip("BORROW_TABLE=1 prints the table of docs/operations.md")
	}
	t.Logf("| --fence-ahead | load (share of capacity) | H/rho | A/rho | largest rollback served |")
	for _, a := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second} {
		for _, perMs := range []int{4, 16, 32, 48} {
			low, high := borrowBounds(a, perMs)
			lo, hi := time.Duration(0), 2*high // lo is served, hi is not
			for hi-lo > high/50 {
				mid := (lo + hi) / 2
				if r := borrowRun(t, a, perMs, mid); r.refused == 0 {
					lo = mid
				} else {
					hi = mid
				}
			}
			if lo < low {
				t.Errorf("fence-ahead %s, load %d/%d: served up to %s, below the low bound %s", a, perMs, borrowPerMs, lo, low)
			}
			t.Logf("| %s | %.0f%% | %s | %s | %s |", a, math.Round(100*float64(perMs)/borrowPerMs), low.Round(time.Millisecond),
				high.Round(time.Millisecond), lo.Round(10*time.Millisecond))
		}
	}
}
