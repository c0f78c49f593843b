package coordinator

import (
	"context"
	"errors"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// The operator commands reach the ZooKeeper WithAdminDial gives them: a
// cluster created there is the one a node of that ZooKeeper joins, and
// Retire finds its node keys there.
func TestAdminCommandsUseTheGivenDialer(t *testing.T) {
	srv := zkmem.New()
	servers := []string{"127.0.0.1:2181"}
	dial := WithAdminDial(srv.Dial)
	spec := ClusterSpec{Layout: snowflake.DefaultLayout(), WorkerIDs: WorkerRange{Lo: 2, Hi: 5}}
	res, err := testAdmin(t, servers, "", 5*time.Second, dial).CreateCluster(context.Background(), "test", spec)
	if err != nil || !res.Created {
		t.Fatalf("CreateCluster: created %v, %v", res.Created, err)
	}
	if _, _, ok := srv.Get("/snowflaked/test"); !ok {
		t.Fatal("no cluster znode in the dialed ZooKeeper")
	}
	cfg := testConfig(t, servers, "k")
	cfg.Dial, cfg.CreateCluster, cfg.WorkerIDs, cfg.RecycleAfter = srv.Dial, false, spec.WorkerIDs, DefaultRecycleAfter
	id := mustClaim(t, newCoord(t, cfg))
	if id.WorkerID < 2 || id.WorkerID > 5 {
		t.Fatalf("the node claimed worker %d, outside the created cluster's range 2-5", id.WorkerID)
	}
	if _, err := testAdmin(t, servers, "", 5*time.Second, dial).Retire(context.Background(), "test", "k"); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("Retire of the live node's key: %v, want ErrLeaseHeld", err)
	}
	if _, err := testAdmin(t, servers, "", 5*time.Second, dial).Retire(context.Background(), "test", "gone"); !errors.Is(err, ErrUnknownNodeKey) {
		t.Fatalf("Retire of an unknown key: %v, want ErrUnknownNodeKey", err)
	}
}
