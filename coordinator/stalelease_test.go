package coordinator

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
)

// A crash leaves the lease of the dead session behind until the session
// expires: the successor with the same node key waits for it, at most the
// stale-lease wait, then takes it. In virtual time, so the bound is exact
// whatever the machine's load.
func TestCrashRestartWaitsAtMostTheStaleLeaseWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := zkmem.New()
		var mu sync.Mutex
		var crashedConns []*zkmem.Conn
		cfg := testConfig(t, []string{"127.0.0.1:2181"}, "k")
		cfg.Dial = func(servers []string, opt zkconn.Options) (zkconn.Conn, error) {
			c := srv.Connect(opt)
			mu.Lock()
			crashedConns = append(crashedConns, c)
			mu.Unlock()
			return c, nil
		}
		crashed := newCoord(t, cfg)
		id := mustClaim(t, crashed)
		lease := fmt.Sprintf("/snowflaked/test/leases/%d", id.WorkerID)
		if _, _, ok := srv.Get(lease); !ok {
			t.Fatal("no lease after the claim")
		}
		mu.Lock()
		for _, c := range crashedConns {
			c.Vanish() // kill -9: no heartbeats; the session expires after its timeout
		}
		mu.Unlock()

		succCfg := testConfig(t, []string{"127.0.0.1:2181"}, "k")
		succCfg.Dial = srv.Dial
		succ := newCoord(t, succCfg)
		start := time.Now()
		id2 := mustClaim(t, succ)
		took := time.Since(start)
		if id2.WorkerID != id.WorkerID {
			t.Fatalf("successor got worker %d, want %d", id2.WorkerID, id.WorkerID)
		}
		if took < testSession {
			t.Fatalf("successor claimed after %v, before the dead session's timeout %v: it did not wait for the stale lease", took, testSession)
		}
		if limit := succ.staleLeaseWait(); took > limit {
			t.Fatalf("successor's Claim took %v, more than the stale-lease wait %v", took, limit)
		}
		t.Logf("the successor took the stale lease %v after the crash (session timeout %v, stale-lease wait %v)", took, testSession, succ.staleLeaseWait())
	})
}
