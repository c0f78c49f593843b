package coordinator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn"
	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
)

// opCounter counts the requests the in-memory ZooKeeper serves, by op.
type opCounter struct {
	mu  sync.Mutex
	ops map[string]int
}

func countOps(srv *zkmem.Server) *opCounter { return countOpsDelayed(srv, 0) }

// countOpsDelayed counts as countOps and answers every request after delay
// (virtual time in a bubble): requests of concurrent callers interleave.
func countOpsDelayed(srv *zkmem.Server, delay time.Duration) *opCounter {
	o := &opCounter{ops: map[string]int{}}
	srv.SetInjector(func(r zkmem.Request) zkmem.Fault {
		o.mu.Lock()
		o.ops[r.Op]++
		o.mu.Unlock()
		return zkmem.Fault{Delay: delay}
	})
	return o
}

// take returns the counts since the last take and starts again.
func (o *opCounter) take() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.ops
	o.ops = map[string]int{}
	return got
}

func total(ops map[string]int) int {
	n := 0
	for _, v := range ops {
		n += v
	}
	return n
}

// The peer view costs no ZooKeeper request while alive/ does not change,
// one listing after a change, and one read per peer address not yet known:
// a clock round's cost does not grow with the cluster.
func TestPeerViewCostsByChangeNotBySize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		srv := zkmem.New()
		cfg := testConfig(t, []string{"127.0.0.1:2181"}, "viewer")
		cfg.Dial = srv.Dial
		c := newCoord(t, cfg)
		id := mustClaim(t, c)
		raw := srv.Connect(zkconn.Options{})
		t.Cleanup(raw.Close)
		const peers = 50
		var want []int64
		for i := range int64(peers) {
			w := 100 + i
			if _, err := raw.Create(c.p.aliveNode(w), []byte(fmt.Sprintf("127.0.0.1:%d", 20000+w)), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				t.Fatal(err)
			}
			want = append(want, w)
		}
		if _, err := raw.Create(c.p.aliveNode(id.WorkerID), []byte(cfg.Advertise), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		ops := countOps(srv)

		ids, err := c.PeerIDs(ctx)
		if err != nil || !slices.Equal(ids, want) {
			t.Fatalf("PeerIDs = %v, %v; want %v (this node's own left out)", ids, err, want)
		}
		if got := ops.take(); got["children"] != 1 || total(got) != 1 {
			t.Fatalf("first listing: %v, want one children request", got)
		}
		for range 10 {
			if _, err := c.PeerIDs(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if got := ops.take(); total(got) != 0 {
			t.Fatalf("ten rounds without a change cost %v, want nothing", got)
		}

		sample := []int64{100, 107, 149}
		got, err := c.PeerAddrs(ctx, sample)
		if err != nil || len(got) != 3 || got[1] != (Peer{WorkerID: 107, Addr: "127.0.0.1:20107"}) {
			t.Fatalf("PeerAddrs = %v, %v", got, err)
		}
		if n := total(ops.take()); n != 3 {
			t.Fatalf("first addresses cost %d requests, want 3", n)
		}
		if _, err := c.PeerAddrs(ctx, sample); err != nil {
			t.Fatal(err)
		}
		if n := total(ops.take()); n != 0 {
			t.Fatalf("known addresses cost %d requests, want 0", n)
		}

		// A peer joins: one listing at the next round, then quiet again.
		if _, err := raw.Create(c.p.aliveNode(150), []byte("127.0.0.1:20150"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		ops.take() // the test's own create
		ids, err = c.PeerIDs(ctx)
		if err != nil || len(ids) != peers+1 || ids[len(ids)-1] != 150 {
			t.Fatalf("after a join PeerIDs = %v, %v", ids, err)
		}
		_, _ = c.PeerIDs(ctx)
		if got := ops.take(); got["children"] != 1 || total(got) != 1 {
			t.Fatalf("a join cost %v, want one children request", got)
		}

		peerMovesAndLeaves(t, c, raw)
	})
}

// peerMovesAndLeaves checks that c's peer view follows a peer restarted on
// a new address under its worker ID (107) once it is forgotten, and leaves
// out a peer that left (149), cached address and all.
func peerMovesAndLeaves(t *testing.T, c *Coordinator, raw *zkmem.Conn) {
	t.Helper()
	ctx := context.Background()
	want := func(id int64, addr string) {
		t.Helper()
		got, err := c.PeerAddrs(ctx, []int64{id})
		if err != nil || len(got) != 1 || got[0].Addr != addr {
			t.Fatalf("PeerAddrs(%d) = %v, %v; want %s", id, got, err, addr)
		}
	}
	if _, err := c.PeerAddrs(ctx, []int64{107}); err != nil { // known again after the join
		t.Fatal(err)
	}
	// A peer restarts on a new address under its worker ID (its alive
	// znode deleted and made again): the next round's listing drops every
	// address, and the next read finds the new one.
	if err := raw.Delete(c.p.aliveNode(107), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(c.p.aliveNode(107), []byte("127.0.0.1:30107"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if _, err := c.PeerIDs(ctx); err != nil {
		t.Fatal(err)
	}
	want(107, "127.0.0.1:30107")
	// An address changed in place (no change of alive/'s list) is read
	// again once the peer could not be reached there (ForgetPeer).
	if _, err := raw.Set(c.p.aliveNode(107), []byte("127.0.0.1:40107"), -1); err != nil {
		t.Fatal(err)
	}
	want(107, "127.0.0.1:30107")
	c.ForgetPeer(107)
	want(107, "127.0.0.1:40107")
	// A peer that left is left out, and so is its cached address.
	if err := raw.Delete(c.p.aliveNode(149), -1); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if ids, _ := c.PeerIDs(ctx); slices.Contains(ids, 149) {
		t.Fatalf("PeerIDs %v still has the peer that left", ids)
	}
	if got, err := c.PeerAddrs(ctx, []int64{149}); err != nil || len(got) != 0 {
		t.Fatalf("PeerAddrs of the peer that left = %v, %v; want none", got, err)
	}
}
