package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	sfclient "codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/client/wire"
	"codeberg.org/snowflaked/snowflaked/client/zkdiscovery"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// zkDiscovery follows cluster's alive/ znodes in zk (auth: "user:password"
// or ""), for a client; it is closed when the test ends, after the client.
func zkDiscovery(t *testing.T, zk *zkharness.Cluster, cluster, auth string) *zkdiscovery.Discovery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := zkdiscovery.New(ctx, zkdiscovery.Config{Servers: strings.Split(zk.ConnectString(), ","), Cluster: cluster, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// zkdiscovery against a real ZooKeeper: the alive/ children in worker-ID
// order (entries that are not a worker ID or not host:port skipped), each
// change announced, a cluster that does not exist refused, a bad config
// ErrInvalidConfig.
func TestIntegration_ZKDiscoveryFollowsAlive(t *testing.T) {
	zkc := zkharness.StartStandalone(t)
	conn, _, err := zk.Connect(strings.Split(zkc.ConnectString(), ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	acl := zk.WorldACL(zk.PermAll)
	create := func(path, data string, flags int32) {
		t.Helper()
		if _, err := conn.Create(path, []byte(data), flags, acl); err != nil {
			t.Fatalf("create %s: %v", path, err)
		}
	}
	for _, p := range []string{wire.Root, wire.ClusterPath("disc"), wire.AlivePath("disc")} {
		create(p, "", 0)
	}
	create(wire.AliveNode("disc", 7), "127.0.0.1:8087", zk.FlagEphemeral)
	create(wire.AliveNode("disc", 2), "127.0.0.1:8082", zk.FlagEphemeral)
	create(wire.AlivePath("disc")+"/lock", "127.0.0.1:9999", zk.FlagEphemeral) // not a worker ID
	create(wire.AliveNode("disc", 5), "not an address", zk.FlagEphemeral)      // not host:port

	d := zkDiscovery(t, zkc, "disc", "")
	nodes, changed := d.Nodes()
	if want := []string{"127.0.0.1:8082", "127.0.0.1:8087"}; !slices.Equal(nodes, want) {
		t.Fatalf("Nodes() = %q, want %q", nodes, want)
	}
	steps := []struct {
		name   string
		change func() error
		want   []string
	}{
		{"a node enters service", func() error {
			_, err := conn.Create(wire.AliveNode("disc", 3), []byte("127.0.0.1:8083"), zk.FlagEphemeral, acl)
			return err
		}, []string{"127.0.0.1:8082", "127.0.0.1:8083", "127.0.0.1:8087"}},
		{"a node leaves", func() error { return conn.Delete(wire.AliveNode("disc", 2), -1) }, []string{"127.0.0.1:8083", "127.0.0.1:8087"}},
	}
	for _, st := range steps {
		if err := st.change(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no change announced within 10s", st.name)
		}
		if nodes, changed = d.Nodes(); !slices.Equal(nodes, st.want) {
			t.Fatalf("%s: Nodes() = %q, want %q", st.name, nodes, st.want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := zkdiscovery.New(ctx, zkdiscovery.Config{Servers: []string{zkc.ConnectString()}, Cluster: "nosuch"}); err == nil || !strings.Contains(err.Error(), `cluster "nosuch" does not exist`) {
		t.Fatalf("a cluster that does not exist: %v", err)
	}
	for _, cfg := range []zkdiscovery.Config{{}, {Servers: []string{"nohost"}}, {Servers: []string{"a:1"}, Cluster: "a/b"}, {Servers: []string{"a:1"}, Auth: "user"}} {
		if _, err := zkdiscovery.New(ctx, cfg); !errors.Is(err, sfclient.ErrInvalidConfig) {
			t.Errorf("zkdiscovery.New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// clusterNodes is what p answers to GET /cluster/nodes: the addresses, in
// the order given, with the worker IDs.
func (p *proc) clusterNodes() (addrs []string, workers []int64) {
	p.t.Helper()
	code, body := p.get(wire.PathClusterNodes)
	if code != http.StatusOK {
		p.t.Fatalf("GET %s: %d %s", wire.PathClusterNodes, code, body)
	}
	var nb wire.ClusterNodesBody
	if err := json.Unmarshal([]byte(body), &nb); err != nil || nb.Nodes == nil {
		p.t.Fatalf("GET %s: %q is not a node list: %v", wire.PathClusterNodes, body, err)
	}
	for _, n := range nb.Nodes {
		addrs, workers = append(addrs, n.Addr), append(workers, n.WorkerID)
	}
	return addrs, workers
}

// within polls cond every pollEvery until it holds, failing the test after
// timeout with what and the last state cond described.
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
		time.Sleep(pollEvery)
	}
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// GET /cluster/nodes on a ZooKeeper cluster of three: every node lists the
// three (itself and its peers from alive/, in worker-ID order); a client
// bootstrapped from one seed finds them all and calls them; when a node
// leaves, the others stop listing it and the client stops calling it. A
// standalone node lists itself.
func TestIntegration_ClusterNodesAndBootstrap(t *testing.T) {
	zkc := zkharness.StartStandalone(t)
	var nodes []*proc
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zkc.ConnectString(), "nodes", fmt.Sprintf("node-%d", i),
			"--peer-interval", "200ms")))
	}
	var all []string
	for _, p := range nodes {
		p.waitReadyz(http.StatusOK, readyTimeout)
		all = append(all, p.addr)
	}
	for _, p := range nodes {
		within(t, 30*time.Second, p.addr+" lists the three", func() (bool, string) {
			addrs, workers := p.clusterNodes()
			return sameSet(addrs, all) && slices.IsSorted(workers), fmt.Sprint(addrs, workers)
		})
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bs, err := sfclient.NewBootstrap(ctx, sfclient.BootstrapConfig{Seeds: []string{nodes[0].addr}, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bs.Close() })
	c, err := sfclient.New(ctx, sfclient.Config{Discovery: bs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if got := c.Nodes(); !sameSet(got, all) {
		t.Fatalf("bootstrapped from %s: %q, want %q", nodes[0].addr, got, all)
	}
	if _, err := c.NextN(ctx, 100); err != nil {
		t.Fatal(err)
	}

	// node-3 leaves.
	gone := nodes[2]
	gone.signal(syscall.SIGTERM)
	if code := gone.exitCode(); code != 0 {
		t.Fatalf("node-3 exited %d", code)
	}
	left := all[:2]
	for _, p := range nodes[:2] {
		within(t, 30*time.Second, p.addr+" stops listing "+gone.addr, func() (bool, string) {
			addrs, _ := p.clusterNodes()
			return sameSet(addrs, left), fmt.Sprint(addrs)
		})
	}
	within(t, 30*time.Second, "the client drops "+gone.addr, func() (bool, string) {
		return sameSet(c.Nodes(), left), fmt.Sprint(c.Nodes())
	})
	for range 20 {
		if _, err := c.NextN(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}

	// A standalone node lists itself alone.
	solo := startNode(t, binSnowflaked, nodeArgs(t.TempDir(), 5))
	solo.waitReadyz(http.StatusOK, readyTimeout)
	if addrs, workers := solo.clusterNodes(); !slices.Equal(addrs, []string{solo.addr}) || !slices.Equal(workers, []int64{5}) {
		t.Fatalf("standalone: %q %v, want %s worker 5", addrs, workers, solo.addr)
	}
}
