package coordinator

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// TestIntegration_RetireLetsTheNextHolderStartAfterTheFence: a cluster of
// one worker ID; its holder stops. Before the retire a new node key finds
// no free worker ID (recycle-after is an hour); after it, the new key
// takes the ID over with the retired holder's fence as its floor. Retire
// is refused while the lease is held and for an unknown key.
func TestIntegration_RetireLetsTheNextHolderStartAfterTheFence(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	cfgFor := func(key string) Config {
		cfg := testConfig(t, srv, key)
		cfg.Cluster, cfg.WorkerIDs = "one", WorkerRange{5, 5}
		return cfg
	}
	old := newCoord(t, cfgFor("old"))
	oid := mustClaim(t, old)
	if oid.WorkerID != 5 {
		t.Fatalf("old got worker %d, want 5", oid.WorkerID)
	}

	adm := testAdmin(t, srv, "", 5*time.Second)
	_, err := adm.Retire(ctx, "one", "old")
	if !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), `node key "old"`) {
		t.Fatalf("Retire with the lease held: %v, want ErrLeaseHeld naming the holder", err)
	}
	_, err = adm.Retire(ctx, "one", "nobody")
	if !errors.Is(err, ErrUnknownNodeKey) || !strings.Contains(err.Error(), "its node keys are old") {
		t.Fatalf("Retire of an unknown key: %v, want ErrUnknownNodeKey listing the keys", err)
	}

	lastIssued := time.Now().Add(2 * time.Second).UnixMilli() // the holder's final fence, ahead of the clock
	if err := old.Close(ctx, snowflake.UnixMilli(lastIssued)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := newCoord(t, cfgFor("early")).Claim(ctx, Prior{}); !errors.Is(err, errNoFreeWorkerID) {
		t.Fatalf("before the retire: Claim %v, want ErrNoFreeWorkerID", err)
	}
	res, err := adm.Retire(ctx, "one", "old")
	if err != nil || len(res.WorkerIDs) != 1 || res.WorkerIDs[0] != 5 || res.Fence < snowflake.UnixMilli(lastIssued) || res.Already {
		t.Fatalf("Retire = %+v, %v; want worker 5 with fence >= %d", res, err, lastIssued)
	}
	if res, err := adm.Retire(ctx, "one", "old"); err != nil || !res.Already {
		t.Fatalf("Retire again = %+v, %v; want already retired", res, err)
	}
	nid := mustClaim(t, newCoord(t, cfgFor("new")))
	if nid.WorkerID != 5 || !nid.Recycled || nid.PrevFence < snowflake.UnixMilli(lastIssued) {
		t.Fatalf("new claim %+v: want worker 5 recycled, starting after the retired fence %d", nid, lastIssued)
	}
}
