package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
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
