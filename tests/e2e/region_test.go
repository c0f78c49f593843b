package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// One ZooKeeper ensemble per region: two clusters with disjoint
// --worker-id-range claim worker IDs only inside their range and issue
// IDs unique across both; a node configured with another range is
// refused naming both; a full range is a clear error; snowflakectl status
// shows the range.
func TestIntegration_WorkerIDRangePerRegion(t *testing.T) {
	regions := []struct {
		rng    string
		lo, hi int64
	}{{"0-511", 0, 511}, {"512-1023", 512, 1023}}
	seen := map[int64]string{}
	var zks []*zkharness.Cluster
	for _, r := range regions {
		zk := zkharness.StartStandalone(t)
		zks = append(zks, zk)
		for i := range 2 {
			key := "node-" + strconv.Itoa(i)
			p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "region", key, "--worker-id-range", r.rng))
			p.waitReadyz(http.StatusOK, readyTimeout)
			ids := p.ids(2000)
			if w := workerOf(t, ids); w < r.lo || w > r.hi {
				t.Fatalf("region %s: %s got worker ID %d", r.rng, key, w)
			}
			for _, id := range ids {
				if prev, dup := seen[id]; dup {
					t.Fatalf("ID %d from region %s %s and from %s", id, r.rng, key, prev)
				}
				seen[id] = r.rng + " " + key
			}
		}
	}
	code, out, errOut := ctl(t, "status", "--zk", zks[1].ConnectString(), "--cluster", "region")
	if code != 0 || !strings.Contains(out, "worker IDs 512-1023") {
		t.Errorf("snowflakectl status: %d %s %s", code, out, errOut)
	}

	// Another range in the same cluster: refused, naming both.
	odd := start(t, binSnowflaked, clusterArgs(t.TempDir(), zks[0].ConnectString(), "region", "node-odd", "--worker-id-range", "0-255"))
	if code := odd.exitCode(); code != 2 || !strings.Contains(odd.Output(), "uses --worker-id-range 0-511, this node is configured with 0-255") {
		t.Errorf("a node with another range: exit %d:\n%s", code, odd.Tail(5))
	}

	// A range of one worker ID: the second node finds none free.
	zk := zkharness.StartStandalone(t)
	one := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "tiny", "a", "--worker-id-range", "7-7"))
	one.waitReadyz(http.StatusOK, readyTimeout)
	if w := workerOf(t, one.ids(1)); w != 7 {
		t.Errorf("range 7-7 gave worker %d", w)
	}
	full := start(t, binSnowflaked, clusterArgs(t.TempDir(), zk.ConnectString(), "tiny", "b", "--worker-id-range", "7-7"))
	if code := full.exitCode(); code == 0 || !strings.Contains(full.Output(), "worker IDs of the cluster's range 7-7 are taken") {
		t.Errorf("a second node in a full range: exit %d:\n%s", code, full.Tail(5))
	}
}
