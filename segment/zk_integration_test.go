package segment_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// zkNode is one "node" of the test: its own ZooKeeper session and service,
// replaced on each restart; its state file stays (same disk).
type zkNode struct {
	name  string
	file  string
	inc   string
	srv   []string
	mu    sync.RWMutex // held for writing while the node restarts
	store *segment.ZKStore
	svc   *segment.Service
	gen   int // restarts so far: a goroutine's IDs increase within one
}

func openStore(t *testing.T, servers []string) *segment.ZKStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for attempt := 0; ; attempt++ {
		st, err := segment.OpenZK(ctx, segment.ZKConfig{Servers: servers, Cluster: "seg", Timeout: 5 * time.Second})
		if err == nil {
			return st
		}
		if attempt == 20 {
			t.Fatalf("OpenSegments: %v", err)
		}
		time.Sleep(250 * time.Millisecond) // an election in progress
	}
}

func (n *zkNode) start(t *testing.T) {
	t.Helper()
	n.store = openStore(t, n.srv)
	svc, err := segment.New(segment.Config{Store: n.store, StateFile: n.file, Incarnation: n.inc, Holder: n.name, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.svc = svc
	n.gen++
}

// Three nodes take IDs of one tag from many goroutines while the ZooKeeper
// ensemble loses its leader and nodes are killed (-9) and cleanly restarted,
// the faults overlapping. No ID twice, each node's IDs increase, and the
// IDs missing from the dense sequence are exactly what the design loses: a
// clean restart nothing, a crash the mark's lead, and a ZooKeeper write
// whose answer was lost at most its range.
func TestIntegration_SegmentsUnderOverlappingFaults(t *testing.T) {
	zkc := zkharness.StartEnsemble(t, 3)
	srv := strings.Split(zkc.ConnectString(), ",")
	ctx := context.Background()
	claimCreator(ctx, t, srv)
	admin := openStore(t, srv)
	defer admin.Close()
	const start = 1000
	if err := admin.Create(ctx, segment.Tag{Name: "orders", Start: start, Step: 20, MaxStep: 5000}); err != nil {
		t.Fatal(err)
	}
	inc, err := admin.Incarnation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	nodes := make([]*zkNode, 3)
	for i := range nodes {
		nodes[i] = &zkNode{name: fmt.Sprintf("node-%d", i), file: filepath.Join(dir, fmt.Sprintf("n%d.json", i)), inc: inc, srv: srv}
		nodes[i].start(t)
	}

	tk := &takers{l: newLedger(), stop: make(chan struct{})}
	for i, n := range nodes {
		for g := range 4 {
			tk.wg.Add(1)
			go tk.run(ctx, t, n, i, g)
		}
	}

	a := &faultAccount{}
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 9 {
		time.Sleep(time.Duration(200+rng.IntN(300)) * time.Millisecond)
		n := nodes[rng.IntN(len(nodes))]
		a.round(ctx, t, zkc, nodes, n, round, rng)
		if err := zkc.WaitServing(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(tk.stop)
	tk.wg.Wait()
	for _, n := range nodes {
		w, err := n.svc.Close(ctx)
		if err != nil {
			t.Errorf("final stop of %s: %v", n.name, err)
		}
		a.closeWaste += w
		a.possiblyLost += n.store.PossiblyLost()
		n.store.Close()
	}
	for i := range nodes {
		if _, ok := tk.taken.Load(i); !ok {
			t.Errorf("node %d issued nothing", i)
		}
	}
	checkSegmentAccounting(ctx, t, admin, start, tk, a)
}

// claimCreator starts a coordinator that creates cluster "seg" and claims
// in it, closed at the test's end.
func claimCreator(ctx context.Context, t *testing.T, srv []string) {
	t.Helper()
	coord, err := coordinator.New(coordinator.Config{Servers: srv, SessionTimeout: 4 * time.Second, Cluster: "seg", NodeKey: "creator", CreateCluster: true,
		Advertise: "127.0.0.1:1", Layout: snowflake.DefaultLayout(), RecycleAfter: time.Hour, ReportInterval: 200 * time.Millisecond,
		ZKFenceAhead: 1200 * time.Millisecond, ConnectTimeout: 10 * time.Second, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := coord.Claim(ctx, coordinator.Prior{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = coord.Close(context.Background(), 0) })
}

// takers are the goroutines taking IDs of tag "orders" until stop closes.
type takers struct {
	l                  *ledger
	stop               chan struct{}
	wg                 sync.WaitGroup
	unavailable, taken sync.Map // node index: *atomic.Int64 of ErrUnavailable answers; true once it issued
}

// run is goroutine g of node i: each node's IDs increase within one of its
// lives (gen).
func (tk *takers) run(ctx context.Context, t *testing.T, n *zkNode, i, g int) {
	defer tk.wg.Done()
	var last int64
	gen := -1
	for k := 0; ; k++ {
		select {
		case <-tk.stop:
			return
		default:
		}
		n.mu.RLock()
		if n.gen != gen {
			gen, last = n.gen, 0
		}
		ids, err := n.svc.Take(ctx, "orders", nil, 1+k%5)
		n.mu.RUnlock()
		if errors.Is(err, segment.ErrUnavailable) {
			v, _ := tk.unavailable.LoadOrStore(i, new(atomic.Int64))
			v.(*atomic.Int64).Add(1)
			continue
		}
		if err != nil {
			t.Errorf("node %d: %v", i, err)
			return
		}
		for _, id := range ids {
			if id <= last {
				t.Errorf("node %d goroutine %d: ID %d after %d", i, g, id, last)
			}
			last = id
		}
		tk.l.add(t, n.name, ids)
		tk.taken.Store(i, true)
		// Paced (about 1,000 takes/s per goroutine): the test is about
		// faults, and other packages' tests share the machine.
		time.Sleep(time.Millisecond)
	}
}

// faultAccount counts the faults and what they may lose; the fault
// functions run concurrently.
type faultAccount struct {
	mu                                  sync.Mutex
	crashLoss, closeWaste, possiblyLost int64
	crashes, cleans, leaderKills        int
}

// crash kills n (-9) and restarts it.
func (a *faultAccount) crash(t *testing.T, n *zkNode) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.svc.Crash()
	a.mu.Lock()
	for _, ts := range n.svc.Status() {
		a.crashLoss += ts.Ahead
	}
	a.possiblyLost += n.store.PossiblyLost()
	a.crashes++
	a.mu.Unlock()
	n.store.Close()
	n.start(t)
}

// clean stops n cleanly and restarts it.
func (a *faultAccount) clean(ctx context.Context, t *testing.T, n *zkNode) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	w, err := n.svc.Close(cctx)
	cancel()
	if err != nil {
		t.Logf("clean stop of %s: %v (wasted %d)", n.name, err, w)
	}
	a.mu.Lock()
	a.closeWaste += w
	a.possiblyLost += n.store.PossiblyLost()
	a.cleans++
	a.mu.Unlock()
	n.store.Close()
	n.start(t)
}

// round injects fault round's overlapping faults, n the node it hits.
func (a *faultAccount) round(ctx context.Context, t *testing.T, zkc *zkharness.Cluster, nodes []*zkNode, n *zkNode, round int, rng *rand.Rand) {
	t.Helper()
	switch round % 3 {
	case 0: // the leader dies and, before the election ends, a node is killed
		leader, err := zkc.Leader()
		if err != nil {
			t.Fatal(err)
		}
		if err := leader.Kill(); err != nil {
			t.Fatal(err)
		}
		a.leaderKills++
		a.crash(t, n)
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
	case 1: // a clean restart while another node crashes
		var done sync.WaitGroup
		done.Add(1)
		go func() { defer done.Done(); a.clean(ctx, t, n) }()
		a.crash(t, nodes[(rng.IntN(2)+1+indexOf(nodes, n))%len(nodes)])
		done.Wait()
	case 2: // a clean restart during a leader restart
		leader, err := zkc.Leader()
		if err != nil {
			t.Fatal(err)
		}
		if err := leader.Stop(); err != nil {
			t.Fatal(err)
		}
		a.leaderKills++
		a.clean(ctx, t, n)
		if err := leader.Start(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkSegmentAccounting checks no ID was issued twice and the IDs missing
// from the dense sequence are exactly what the faults may lose.
func checkSegmentAccounting(ctx context.Context, t *testing.T, admin *segment.ZKStore, start int64, tk *takers, a *faultAccount) {
	t.Helper()
	tag, err := admin.Tag(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	returned, err := admin.Returned(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	var back int64
	for _, r := range returned {
		back += r.Len()
	}
	issued, lo, hi := tk.l.span()
	gone := tag.MaxID - start - back // handed to nodes and not given back
	t.Logf("%d IDs issued over [%d,%d] (dense-ness %.4f) through %d crashes, %d clean restarts, %d leader stops; max_id %d, returned %d; lost: crashes %d, failed returns %d, unknown ZooKeeper outcomes ≤ %d; waits that ran out %v",
		issued, lo, hi, float64(issued)/float64(hi-lo+1), a.crashes, a.cleans, a.leaderKills, tag.MaxID, back, a.crashLoss, a.closeWaste, a.possiblyLost, syncMapInts(&tk.unavailable))
	if tk.l.dups != 0 {
		t.Fatalf("%d duplicates", tk.l.dups)
	}
	// A return whose outcome could not be told counts both as a failed
	// return (closeWaste) and as possibly lost; if it did land, its range is
	// in returned/ after all. An allocation of unknown outcome counts only
	// as possibly lost; if it landed, its range is gone. So the possibly
	// lost IDs widen the bound both ways, and nothing else may.
	if want := issued + a.crashLoss + a.closeWaste; gone < want-a.possiblyLost || gone > want+a.possiblyLost {
		t.Fatalf("max_id - start - returned = %d; want issued %d + crash loss %d + failed returns %d (± up to %d of unknown outcome)", gone, issued, a.crashLoss, a.closeWaste, a.possiblyLost)
	}
}

func indexOf(nodes []*zkNode, n *zkNode) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return -1
}

func syncMapInts(m *sync.Map) map[int]int64 {
	out := map[int]int64{}
	m.Range(func(k, v any) bool { out[k.(int)] = v.(*atomic.Int64).Load(); return true })
	return out
}
