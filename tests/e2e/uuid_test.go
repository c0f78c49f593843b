package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"

	sfclient "codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/uuidv7"
)

// UUIDv7 on a real 3-node cluster, through HTTP, the client and
// snowflakectl, across a restart: every UUID is version 7, decodes to a
// distinct snowflake ID of a live worker, and none repeats.
func TestIntegration_UUIDCluster(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	codec, err := uuidv7.NewCodec(snowflake.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*proc
	var dirs []string
	for i := range 3 {
		dir := t.TempDir()
		dirs = append(dirs, dir)
		nodes = append(nodes, startNode(t, binSnowflaked, clusterArgs(dir, zk.ConnectString(), "uuid", "node-"+string(rune('a'+i)))))
	}
	var all []string
	for i, p := range nodes {
		p.waitReadyz(http.StatusOK, readyTimeout)
		code, body := p.get("/uuids?count=1000")
		if code != http.StatusOK {
			t.Fatalf("node %d: /uuids: %d %s", i, code, body)
		}
		lines := strings.Fields(body)
		if !slices.IsSorted(lines) || len(lines) != 1000 {
			t.Fatalf("node %d: %d UUIDs, sorted %v", i, len(lines), slices.IsSorted(lines))
		}
		all = append(all, lines...)
	}
	c, err := sfclient.New(context.Background(), sfclient.Config{Discovery: zkDiscovery(t, zk, "uuid", "")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 100 {
		u, err := c.NextUUID(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, u.String())
	}
	code, out, errOut := ctl(t, "get", "--uuid", "--count", "10", "--zk", zk.ConnectString(), "--cluster", "uuid")
	if code != 0 {
		t.Fatalf("snowflakectl get --uuid: %d %s", code, errOut)
	}
	all = append(all, strings.Fields(out)...)

	nodes[1].signal(syscall.SIGTERM)
	if code := nodes[1].exitCode(); code != 0 {
		t.Fatalf("node b exit %d", code)
	}
	again := startNode(t, binSnowflaked, clusterArgs(dirs[1], zk.ConnectString(), "uuid", "node-b"))
	again.waitReadyz(http.StatusOK, readyTimeout)
	_, body := again.get("/uuids?count=1000")
	all = append(all, strings.Fields(body)...)

	ids := map[int64]string{}
	for _, s := range all {
		u, err := uuidv7.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		id, err := codec.Decode(u)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if prev, dup := ids[id]; dup {
			t.Fatalf("UUIDs %s and %s come from the same ID %d", prev, s, id)
		}
		ids[id] = s
	}
	if len(ids) != len(all) || len(all) < 4100 {
		t.Fatalf("%d UUIDs, %d distinct IDs", len(all), len(ids))
	}
	// snowflakectl and the node decode a UUID alike.
	code, out, _ = ctl(t, "decode", "--json", all[0])
	_, fromNode := nodes[0].get("/decode/" + all[0])
	if code != 0 || !strings.Contains(fromNode, `"uuid":"`+all[0]) || !strings.Contains(out, `"worker_id":`) {
		t.Errorf("decode %s: ctl %d %s; node %s", all[0], code, out, fromNode)
	}
}
