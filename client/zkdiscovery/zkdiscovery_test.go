//go:build unix

package zkdiscovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/internal/rendezvous"
	"codeberg.org/snowflaked/snowflaked/client/wire"
)

// counter counts what a Discovery asks ZooKeeper.
type counter struct {
	reader
	children, gets, exists atomic.Int64
}

func (c *counter) Exists(path string) (bool, *zk.Stat, error) {
	c.exists.Add(1)
	return c.reader.Exists(path)
}

func (c *counter) Children(path string) ([]string, *zk.Stat, error) {
	c.children.Add(1)
	return c.reader.Children(path)
}

func (c *counter) ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	c.children.Add(1)
	return c.reader.ChildrenW(path)
}

func (c *counter) GetW(path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	c.gets.Add(1)
	return c.reader.GetW(path)
}

// reads are the reads so far: getChildren and getData (exists is only
// New's look for the cluster).
func (c *counter) reads() (children, gets int64) { return c.children.Load(), c.gets.Load() }

// cluster is a cluster's znodes in a test's ZooKeeper, written through a
// session of the test's own.
type cluster struct {
	t      *testing.T
	server string // "127.0.0.1:port"
	name   string
	conn   *zk.Conn
}

// startCluster starts a ZooKeeper (skipping the test without one) and
// creates cluster name in it, with its alive/.
func startCluster(t *testing.T, name string) *cluster {
	t.Helper()
	addr := startZooKeeper(t)
	conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("connect to ZooKeeper %s: %v", addr, err)
	}
	t.Cleanup(conn.Close)
	c := &cluster{t: t, server: addr, name: name, conn: conn}
	for _, p := range []string{wire.Root, wire.ClusterPath(name), wire.AlivePath(name)} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	return c
}

// add creates alive/<name> holding data (ephemeral, as a node does).
func (c *cluster) add(name, data string) {
	c.t.Helper()
	if _, err := c.conn.Create(wire.AlivePath(c.name)+"/"+name, []byte(data), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		c.t.Fatalf("create alive/%s: %v", name, err)
	}
}

// remove deletes alive/<name>.
func (c *cluster) remove(name string) {
	c.t.Helper()
	if err := c.conn.Delete(wire.AlivePath(c.name)+"/"+name, -1); err != nil {
		c.t.Fatalf("delete alive/%s: %v", name, err)
	}
}

// replace deletes alive/<name> and creates it again holding data, in one
// transaction (one change to alive/).
func (c *cluster) replace(name, data string) {
	c.t.Helper()
	p := wire.AlivePath(c.name) + "/" + name
	if _, err := c.conn.Multi(&zk.DeleteRequest{Path: p, Version: -1},
		&zk.CreateRequest{Path: p, Data: []byte(data), Flags: zk.FlagEphemeral, Acl: zk.WorldACL(zk.PermAll)}); err != nil {
		c.t.Fatalf("replace alive/%s: %v", name, err)
	}
}

// follow starts a Discovery of the cluster with cfg (Servers and Cluster
// filled in, RelistDelay NoRelistDelay unless set), counting its reads;
// closed when the test ends.
func (c *cluster) follow(cfg Config) (*Discovery, *counter) {
	c.t.Helper()
	d, n, err := c.tryFollow(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	return d, n
}

// tryFollow is follow, returning its error (for goroutines).
func (c *cluster) tryFollow(cfg Config) (*Discovery, *counter, error) {
	cfg.Servers, cfg.Cluster = []string{c.server}, c.name
	if cfg.RelistDelay == 0 {
		cfg.RelistDelay = NoRelistDelay
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := &counter{}
	d, err := newDiscovery(ctx, cfg, func(r reader) reader { n.reader = r; return n })
	if err != nil {
		return nil, nil, err
	}
	c.t.Cleanup(func() { _ = d.Close() })
	return d, n, nil
}

// within polls cond until it holds, failing the test after timeout with
// what and the last state cond described.
func within(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, timeout, state)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// settled reports whether d has received events watch events and has no
// re-list to do: with no further event, it reads nothing more.
func (d *Discovery) settled(events int) bool {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.events >= events && !d.pending && !d.listing
}

// eventCount is how many watch events d received.
func (d *Discovery) eventCount() int {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return d.events
}

// watching reports whether d holds a data watch on child name.
func (d *Discovery) watching(name string) bool {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	_, ok := d.cache[name]
	return ok
}

// want is the subset client id should follow among alive (worker ID ->
// address; entries that are not host:port skipped): its first k, their
// addresses in worker-ID order.
func want(id uint64, k int, alive map[int64]string) []string {
	var names []string
	for w, addr := range alive {
		if wire.CheckHostPort(addr) == nil {
			names = append(names, wire.AliveName(w))
		}
	}
	var ids []int64
	for _, i := range rendezvous.Top(id, names, k) {
		w, _ := wire.ParseAliveName(names[i])
		ids = append(ids, w)
	}
	slices.Sort(ids)
	out := make([]string, len(ids))
	for i, w := range ids {
		out[i] = alive[w]
	}
	return out
}

// nodeAddr is worker w's address in these tests.
func nodeAddr(w int64) string { return fmt.Sprintf("127.0.0.1:%d", 20000+w) }

// The Discovery lists alive/ (in worker-ID order; entries that are not a
// worker ID or not host:port skipped, the latter replaced by the next node
// of the ranking) and announces each change: a node that enters service,
// one that leaves, one created again under its worker ID with another
// address; with Subset at least the cluster's size, every node. A cluster
// that does not exist is refused.
func TestFollowsAlive(t *testing.T) {
	c := startCluster(t, "follow")
	c.add("7", "127.0.0.1:8087")
	c.add("2", "127.0.0.1:8082")
	c.add("lock", "127.0.0.1:9999") // not a worker ID
	c.add("5", "not an address")
	d, _ := c.follow(Config{})
	nodes, changed := d.Nodes()
	if want := []string{"127.0.0.1:8082", "127.0.0.1:8087"}; !slices.Equal(nodes, want) {
		t.Fatalf("Nodes() = %q, want %q", nodes, want)
	}
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"a node enters service", func() { c.add("3", "127.0.0.1:8083") }, []string{"127.0.0.1:8082", "127.0.0.1:8083", "127.0.0.1:8087"}},
		{"a node leaves", func() { c.remove("2") }, []string{"127.0.0.1:8083", "127.0.0.1:8087"}},
		{"a node comes back with another address", func() { c.remove("7"); c.add("7", "127.0.0.1:9087") }, []string{"127.0.0.1:8083", "127.0.0.1:9087"}},
		{"the same, at once", func() { c.replace("3", "127.0.0.1:9083") }, []string{"127.0.0.1:9083", "127.0.0.1:9087"}},
	}
	for _, st := range steps {
		st.change()
		within(t, 10*time.Second, st.name, func() (bool, string) {
			nodes, _ := d.Nodes()
			return slices.Equal(nodes, st.want), fmt.Sprint(nodes)
		})
		select {
		case <-changed:
		default:
			t.Fatalf("%s: the list changed but its channel is open", st.name)
		}
		_, changed = d.Nodes()
	}

	// A cluster that does not exist is refused, naming it.
	c.name = "nosuch"
	if _, _, err := c.tryFollow(Config{}); err == nil || !strings.Contains(err.Error(), `cluster "nosuch" does not exist`) {
		t.Fatalf("a cluster that does not exist: %v", err)
	}
}

// With Subset k the Discovery follows the first k of its ranking of the
// worker IDs, reading the data of those alone: 1 getChildren and k
// getData at the start. A child that is not host:port is skipped for the
// next of the ranking. A client over it keeps the k.
func TestFollowsItsSubset(t *testing.T) {
	c := startCluster(t, "subset")
	alive := map[int64]string{}
	for w := range int64(10) {
		alive[w] = nodeAddr(w)
		c.add(wire.AliveName(w), alive[w])
	}
	// The first of client 1's ranking holds no address.
	names := make([]string, 0, len(alive))
	for w := range alive {
		names = append(names, wire.AliveName(w))
	}
	first := names[rendezvous.Rank(1, names)[0]]
	broken, _ := wire.ParseAliveName(first)
	c.remove(first)
	c.add(first, "not an address")
	alive[broken] = "not an address"

	// read is how many children client id reads for k usable ones: down
	// its ranking to the k-th that is host:port.
	read := func(id uint64, k int) (n int64) {
		for _, i := range rendezvous.Rank(id, names) {
			if k == 0 {
				break
			}
			n++
			if w, _ := wire.ParseAliveName(names[i]); w != broken {
				k--
			}
		}
		return n
	}
	tests := []struct {
		name string
		id   uint64
		k    int
	}{
		{"k=3", 7, 3},
		{"k=1", 8, 1},
		{"k=3, the first broken", 1, 3},
		{"k=1, the first broken", 1, 1},
		{"k above the cluster's size", 9, 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, n := c.follow(Config{Subset: tt.k, SubsetID: tt.id})
			nodes, _ := d.Nodes()
			if w := want(tt.id, tt.k, alive); !slices.Equal(nodes, w) || len(nodes) != min(tt.k, len(alive)-1) {
				t.Fatalf("Nodes() = %q, want %q", nodes, w)
			}
			wantReads := read(tt.id, tt.k)
			if tt.id == 1 && wantReads != int64(min(tt.k, len(alive)-1)+1) {
				t.Fatalf("client 1 reads %d children, want its broken first and %d more", wantReads, tt.k)
			}
			if ch, gets := n.reads(); ch != 1 || gets != wantReads {
				t.Fatalf("start: %d getChildren, %d getData; want 1, %d", ch, gets, wantReads)
			}
			// A client with the same ID over it keeps the whole list as
			// its subset, when no larger.
			cl, err := client.New(context.Background(), client.Config{Discovery: d, Subset: tt.k, SubsetID: tt.id})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if !slices.Equal(cl.Nodes(), nodes) || !slices.Equal(cl.Subset(), nodes) {
				t.Fatalf("client: nodes %q, subset %q; want the discovery's %q", cl.Nodes(), cl.Subset(), nodes)
			}
		})
	}
}

// With the defaults a Discovery gives the client twice its subset: the
// client has as many nodes beyond its own to go on to when its own cannot
// be reached from it, though they are still under alive/.
func TestDefaultsLeaveTheClientNodesToGoOnTo(t *testing.T) {
	c := startCluster(t, "defaults")
	for w := range int64(20) {
		c.add(wire.AliveName(w), nodeAddr(w))
	}
	d, _ := c.follow(Config{SubsetID: 5})
	cl, err := client.New(context.Background(), client.Config{Discovery: d, SubsetID: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	nodes, subset := cl.Nodes(), cl.Subset()
	if len(nodes) != DefaultSubset || len(subset) != client.DefaultSubset {
		t.Fatalf("the client knows %d nodes, its subset %d; want %d and %d", len(nodes), len(subset), DefaultSubset, client.DefaultSubset)
	}
	for _, n := range subset {
		if !slices.Contains(nodes, n) {
			t.Fatalf("subset node %s is not among the discovery's %q", n, nodes)
		}
	}
}

// fleet is many Discoveries of one cluster, client i+1 with SubsetID i+1,
// each with its own session and read counter.
type fleet struct {
	t     *testing.T
	k     int
	ds    []*Discovery
	ns    []*counter
	alive map[int64]string // what alive/ holds: worker ID -> address
}

// startFleet starts clients Discoveries of c with Subset k, at once.
func startFleet(t *testing.T, c *cluster, clients, k int, alive map[int64]string) *fleet {
	t.Helper()
	f := &fleet{t: t, k: k, ds: make([]*Discovery, clients), ns: make([]*counter, clients), alive: alive}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Go(func() {
			d, n, err := c.tryFollow(Config{Subset: k, SubsetID: uint64(i + 1)})
			if err != nil {
				errs <- fmt.Errorf("client %d: %w", i+1, err)
				return
			}
			f.ds[i], f.ns[i] = d, n
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return f
}

// want is client i's subset now.
func (f *fleet) want(i int) []string { return want(uint64(i+1), f.k, f.alive) }

// inSubset counts the clients whose subset holds worker w.
func (f *fleet) inSubset(w int64) (n int) {
	for _, d := range f.ds {
		if got, _ := d.Nodes(); slices.Contains(got, f.alive[w]) {
			n++
		}
	}
	return n
}

// busiest is a worker in the most subsets.
func (f *fleet) busiest() (best int64) {
	most := -1
	for w := range f.alive {
		if n := f.inSubset(w); n > most || (n == most && w < best) {
			best, most = w, n
		}
	}
	return best
}

// change makes a change to alive/ (to worker w, -1 for a new one) and
// waits until every client has received its events (the children's, and
// a data event where it watched w) and re-listed to the subset the
// ranking says; it returns each client's reads for the change, getChildren
// and getData, and whether its subset changed.
func (f *fleet) change(name string, w int64, change func()) (reads [][2]int64, touched []bool) {
	f.t.Helper()
	n := len(f.ds)
	events, before, wantBefore := make([]int, n), make([][2]int64, n), make([][]string, n)
	had := 0
	for i, d := range f.ds {
		events[i] = d.eventCount() + 1
		if w >= 0 && d.watching(wire.AliveName(w)) {
			events[i]++
			had++
		}
		before[i][0], before[i][1] = f.ns[i].reads()
		wantBefore[i] = f.want(i)
	}
	change()
	if w >= 0 {
		f.t.Logf("%s: worker %d, watched by %d clients", name, w, had)
	}
	within(f.t, 30*time.Second, name, func() (bool, string) {
		for i, d := range f.ds {
			if !d.settled(events[i]) {
				return false, fmt.Sprintf("client %d: %d events of %d, or still re-listing", i+1, d.eventCount(), events[i])
			}
			if got, _ := d.Nodes(); !slices.Equal(got, f.want(i)) {
				return false, fmt.Sprintf("client %d: Nodes() = %q, want %q", i+1, got, f.want(i))
			}
		}
		return true, ""
	})
	reads, touched = make([][2]int64, n), make([]bool, n)
	for i := range f.ds {
		ch, gets := f.ns[i].reads()
		reads[i] = [2]int64{ch - before[i][0], gets - before[i][1]}
		touched[i] = !slices.Equal(wantBefore[i], f.want(i))
	}
	return reads, touched
}

// 200 clients follow 32 nodes with Subset 6 (each client its own session
// and ID). Each change costs each client O(1) reads: a node that leaves,
// at most 3 (getChildren, getData of the node that replaces it, and a
// getChildren more when the two events of the change come apart); a node
// that joins, at most 2; a node created again under its worker ID with
// another address, at most 3, and the clients that had it follow the new
// address. A client whose subset the change leaves alone makes exactly 1
// read, a getChildren. Each Discovery's list is checked against the
// ranking computed here.
func TestReadsPerChangeWith200Clients(t *testing.T) {
	const clients, nodes, k = 200, 32, 6
	c := startCluster(t, "many")
	alive := map[int64]string{}
	for w := range int64(nodes) {
		alive[w] = nodeAddr(w)
		c.add(wire.AliveName(w), alive[w])
	}
	f := startFleet(t, c, clients, k, alive)
	for i, d := range f.ds {
		if got, _ := d.Nodes(); !slices.Equal(got, f.want(i)) {
			t.Fatalf("client %d: Nodes() = %q, want %q", i+1, got, f.want(i))
		}
		if ch, gets := f.ns[i].reads(); ch != 1 || gets != k {
			t.Fatalf("client %d: start: %d getChildren, %d getData; want 1, %d", i+1, ch, gets, k)
		}
	}
	t.Logf("start: %d clients × (1 getChildren + %d getData) = %d reads (every node's data: %d)", clients, k, clients*(1+k), clients*(1+nodes))

	steps := []struct {
		name     string
		target   func() int64  // the worker changed, -1 for a new one
		change   func(w int64) // changes alive and ZooKeeper
		maxReads int64         // per client
	}{
		{"a node leaves", f.busiest, func(w int64) {
			c.remove(wire.AliveName(w))
			delete(alive, w)
		}, 3},
		{"a node joins", func() int64 { return -1 }, func(int64) {
			alive[nodes] = nodeAddr(nodes)
			c.add(wire.AliveName(nodes), alive[nodes])
		}, 2},
		{"a node is created again with another address", f.busiest, func(w int64) {
			alive[w] = fmt.Sprintf("127.0.0.2:%d", 20000+w)
			c.replace(wire.AliveName(w), alive[w])
		}, 3},
	}
	for _, st := range steps {
		w := st.target()
		reads, touched := f.change(st.name, w, func() { st.change(w) })
		var total, most, moved, gets int64
		for i, r := range reads {
			n := r[0] + r[1]
			total, most, gets = total+n, max(most, n), gets+r[1]
			if touched[i] {
				moved++
			}
			switch {
			case r[0] < 1:
				t.Errorf("%s: client %d did not list alive/ again", st.name, i+1)
			case n > st.maxReads:
				t.Errorf("%s: client %d made %d reads (%d getChildren, %d getData), want at most %d", st.name, i+1, n, r[0], r[1], st.maxReads)
			case !touched[i] && n != 1:
				t.Errorf("%s: client %d, its subset unchanged, made %d reads (%d getChildren, %d getData), want 1 getChildren", st.name, i+1, n, r[0], r[1])
			}
		}
		if moved == 0 {
			t.Errorf("%s: no client's subset changed", st.name)
		}
		t.Logf("%s: %d reads for %d clients (%.2f a client, at most %d; %d getData by the %d clients whose subset changed); reading every child: %d",
			st.name, total, clients, float64(total)/clients, most, gets, moved, clients*(1+int64(len(alive))))
	}
}

// RelistDelay: a pause of 0..RelistDelay at random, spread over that
// range; none with NoRelistDelay; a bad Config is ErrInvalidConfig.
func TestConfig(t *testing.T) {
	for _, tt := range []struct {
		delay    time.Duration
		min, max time.Duration
	}{
		{time.Second, 0, time.Second},
		{50 * time.Millisecond, 0, 50 * time.Millisecond},
	} {
		d := &Discovery{delay: tt.delay}
		lo, hi := time.Hour, time.Duration(-1)
		for range 1000 {
			p := d.pause()
			lo, hi = min(lo, p), max(hi, p)
		}
		if lo < tt.min || hi > tt.max || hi-lo < tt.max*8/10 {
			t.Errorf("RelistDelay %v: pauses %v..%v, want spread over %v..%v", tt.delay, lo, hi, tt.min, tt.max)
		}
	}
	if p := (&Discovery{}).pause(); p != 0 {
		t.Errorf("no delay: pause %v", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, cfg := range []Config{
		{},
		{Servers: []string{"nohost"}},
		{Servers: []string{"a:1"}, Cluster: "a/b"},
		{Servers: []string{"a:1"}, Auth: "user"},
		{Servers: []string{"a:1"}, Subset: -1},
		{Servers: []string{"a:1"}, Subset: client.MaxSubset + 1},
	} {
		if _, err := New(ctx, cfg); !errors.Is(err, client.ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}
