package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

// cutOffConfig is a node of cluster "one" limited to worker 5, with a
// ZooKeeper fence that outlasts its session: cut off from ZooKeeper, it
// loses its lease yet may still issue up to that fence.
func cutOffConfig(t *testing.T, key string, servers []string, fenceAhead time.Duration) Config {
	t.Helper()
	cfg := testConfig(t, servers, key)
	cfg.Cluster, cfg.WorkerIDs = "one", WorkerRange{5, 5}
	cfg.ZKFenceAhead = fenceAhead
	return cfg
}

// TestIntegration_DeleteRefusedWhileAHolderMayStillIssue: cluster delete
// must not count a node cut off from ZooKeeper (session and lease gone,
// fence still ahead) as stopped; deleting and creating the cluster again
// would let a new node take its worker ID with no fence to start after.
func TestIntegration_DeleteRefusedWhileAHolderMayStillIssue(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	px := zkproxy.Start(t, srv[0])
	a := newCoord(t, cutOffConfig(t, "a", []string{px.Addr()}, 20*time.Second))
	aid := mustClaim(t, a)
	fa := &testFence{}
	ga, _ := attachAndRun(t, a, fa)
	waitFor(t, waitLong, "a in service", func() bool { return ga.Ready() })
	raw := rawConn(t, srv, "")
	px.Block()
	t.Cleanup(px.Unblock)
	waitFor(t, waitLong, "a's session to expire", func() bool {
		ok, _ := exists(t, raw, fmt.Sprintf("/snowflaked/one/leases/%d", aid.WorkerID))
		return !ok
	})
	if fence := fa.zk.Load(); fence <= time.Now().UnixMilli() {
		t.Fatalf("a's acknowledged fence %d is already past: the test shows nothing", fence)
	}
	err := testAdmin(t, srv, "", 5*time.Second).DeleteCluster(ctx, "one")
	if !errors.Is(err, ErrLeaseHeld) || !strings.Contains(err.Error(), "may still issue IDs") {
		t.Fatalf("DeleteCluster while a may still issue up to its fence: %v, want ErrLeaseHeld naming the fence", err)
	}
	// Refused, and the cluster is as it was: a node may still join it.
	b := newCoord(t, cutOffConfig(t, "b", srv, 20*time.Second))
	cctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if _, err := b.Claim(cctx, Prior{}); !errors.Is(err, errNoFreeWorkerID) {
		t.Fatalf("a new key after the refused delete: %v, want ErrNoFreeWorkerID (the cluster intact, its one worker ID a's)", err)
	}
}

// TestIntegration_DeleteMarkKeepsNodesOut: while a delete runs (or after
// one that failed half-way) the cluster znode is marked; no node joins it,
// and running the delete again finishes it.
func TestIntegration_DeleteMarkKeepsNodesOut(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	c := newCoord(t, cutOffConfig(t, "a", srv, 2*time.Second))
	mustClaim(t, c)
	if err := c.Close(ctx, 0); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv, "")
	z, err := testAdmin(t, srv, "", 5*time.Second).session(ctx, "one")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := markDeleting(ctx, z, newPaths("one"), "one"); err != nil {
		t.Fatalf("markDeleting: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if _, err := newCoord(t, cutOffConfig(t, "b", srv, 2*time.Second)).Claim(cctx, Prior{}); !errors.Is(err, ErrUnknownFeature) || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("a node joining a cluster marked for deletion: %v, want ErrUnknownFeature saying it is being deleted", err)
	}
	adm := testAdmin(t, srv, "", 5*time.Second) // one session for every try
	waitFor(t, waitLong, "a's two-second fence to pass the delete's margin", func() bool {
		return adm.DeleteCluster(ctx, "one") == nil
	})
	if ok, _ := exists(t, raw, "/snowflaked/one"); ok {
		t.Fatal("the cluster is still there after the delete")
	}
}

// TestIntegration_RetireOfALiveNodeDoesNotStick: a node whose session
// expired while the process lived is retired by mistake. When it
// reconnects and renews, the mark must go: otherwise the next lease gap
// lets another key recycle its worker ID at once instead of after
// recycle-after.
func TestIntegration_RetireOfALiveNodeDoesNotStick(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	ctx := context.Background()
	px := zkproxy.Start(t, srv[0])
	live := newCoord(t, cutOffConfig(t, "live", []string{px.Addr()}, 12*time.Second))
	id := mustClaim(t, live)
	g, _ := attachAndRun(t, live, &testFence{})
	waitFor(t, waitLong, "in service", func() bool { return g.Ready() && live.Status().AlivePresent })
	raw := rawConn(t, srv, "")
	lease := fmt.Sprintf("/snowflaked/one/leases/%d", id.WorkerID)
	px.Block()
	t.Cleanup(px.Unblock)
	waitFor(t, waitLong, "the session to expire (lease gone)", func() bool { ok, _ := exists(t, raw, lease); return !ok })
	if _, err := testAdmin(t, srv, "", 5*time.Second).Retire(ctx, "one", "live"); err != nil {
		t.Fatalf("Retire while the lease is gone: %v", err)
	}
	px.Unblock()
	waitFor(t, waitLong, "the live node back with its lease", func() bool {
		st := live.Status()
		return st.LeaseHeld && st.WorkerID == id.WorkerID && g.Ready()
	})
	before := live.Status().Reports
	waitFor(t, waitLong, "two renewals", func() bool { return live.Status().Reports >= before+2 })
	if d, _ := readForeverData(t, raw, id.Path); d.Retired != 0 {
		t.Fatalf("the live node renewed, yet its forever znode is still marked retired (%d)", d.Retired)
	}
	px.Block()
	waitFor(t, waitLong, "the session to expire again", func() bool { ok, _ := exists(t, raw, lease); return !ok })
	cctx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if oid, err := newCoord(t, cutOffConfig(t, "other", srv, 12*time.Second)).Claim(cctx, Prior{}); !errors.Is(err, errNoFreeWorkerID) {
		t.Errorf("a new key during the live node's second lease gap: Claim = %+v, %v; want ErrNoFreeWorkerID", oid, err)
	}
}
