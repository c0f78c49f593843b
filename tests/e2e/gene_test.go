package e2e

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	sfclient "codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// Gene bits on a real 3-node cluster: IDs asked for with a gene end in it,
// through HTTP, the client and snowflakectl; IDs without one spread evenly;
// all are unique across nodes and a restart; a node configured with other
// gene bits refuses to join.
func TestIntegration_GeneBitsCluster(t *testing.T) {
	const k = 6
	mask := int64(1)<<k - 1
	zk := zkharness.StartStandalone(t)
	var nodes []*proc
	var dirs []string
	for i := range 3 {
		dir := t.TempDir()
		dirs = append(dirs, dir)
		p := startNode(t, binSnowflaked, clusterArgs(dir, zk.ConnectString(), "gene", "node-"+strconv.Itoa(i), "--gene-bits", strconv.Itoa(k)))
		nodes = append(nodes, p)
	}
	var all []int64
	for i, p := range nodes {
		p.waitReadyz(http.StatusOK, readyTimeout)
		gene := int64(1000003 * (i + 1))
		code, body := p.get("/ids?count=500&gene=" + strconv.FormatInt(gene, 10))
		if code != http.StatusOK {
			t.Fatalf("node %d: /ids with gene: %d %s", i, code, body)
		}
		ids := parseIDs(t, body)
		for _, id := range ids {
			if id&mask != gene&mask {
				t.Fatalf("node %d: id %d ends in %d, gene %d in %d", i, id, id&mask, gene, gene&mask)
			}
		}
		all = append(all, ids...)
		// Without a gene: every residue mod 2^k equally often.
		plain := p.ids(64 * 10)
		counts := make([]int, 1<<k)
		for _, id := range plain {
			counts[id&mask]++
		}
		if slices.Min(counts) != slices.Max(counts) {
			t.Errorf("node %d: 640 IDs without a gene spread unevenly mod %d: %v", i, 1<<k, counts)
		}
		all = append(all, plain...)
		_, body = p.get("/decode/" + strconv.FormatInt(ids[0], 10))
		if !strings.Contains(body, `"gene":`+strconv.FormatInt(gene&mask, 10)) {
			t.Errorf("node %d: /decode: %s", i, body)
		}
	}

	// The client and snowflakectl, with discovery.
	c, err := sfclient.New(context.Background(), sfclient.Config{Discovery: zkDiscovery(t, zk, "gene", "")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for g := range uint64(50) {
		id, err := c.NextGene(context.Background(), g*7919)
		if err != nil || id&mask != int64(g*7919)&mask {
			t.Fatalf("client NextGene(%d) = %d, %v", g*7919, id, err)
		}
		all = append(all, id)
	}
	code, out, errOut := ctl(t, "get", "--zk", zk.ConnectString(), "--cluster", "gene", "--gene", "4242", "--count", "5")
	if code != 0 {
		t.Fatalf("snowflakectl get --gene: %d %s", code, errOut)
	}
	for _, f := range strings.Fields(out) {
		id, _ := strconv.ParseInt(f, 10, 64)
		if id&mask != 4242&mask {
			t.Errorf("snowflakectl get --gene 4242: %d ends in %d", id, id&mask)
		}
		all = append(all, id)
	}

	// A restart of node 0 reissues nothing.
	nodes[0].signal(syscall.SIGTERM)
	if code := nodes[0].exitCode(); code != 0 {
		t.Fatalf("node 0 exit %d", code)
	}
	again := startNode(t, binSnowflaked, clusterArgs(dirs[0], zk.ConnectString(), "gene", "node-0", "--gene-bits", strconv.Itoa(k)))
	again.waitReadyz(http.StatusOK, readyTimeout)
	code, body := again.get("/ids?count=500&gene=1000003")
	if code != http.StatusOK {
		t.Fatalf("after restart: %d %s", code, body)
	}
	all = append(all, parseIDs(t, body)...)
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate ID %d among %d", all[i], len(all))
		}
	}

	// Other gene bits: refused, naming both.
	odd := start(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "gene", "node-odd", "--gene-bits", "4"))
	if code := odd.exitCode(); code != 2 {
		t.Fatalf("a node with --gene-bits 4 in a cluster of 6: exit %d, want 2", code)
	}
	if !strings.Contains(odd.Output(), "gene 6") || !strings.Contains(odd.Output(), "gene 4") {
		t.Errorf("the refusal does not name both layouts:\n%s", odd.Tail(5))
	}
}
