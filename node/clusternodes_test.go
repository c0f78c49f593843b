package node

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// A node started alone lists the peers that start after it in
// /cluster/nodes as soon as they are in service, not only after its next
// peer round (an hour away here): its coordinator's watch on alive/ shows
// them, and their addresses are read once.
func TestIntegration_ClusterNodesListsPeersThatStartedLater(t *testing.T) {
	zk := zkharness.StartStandalone(t)
	cfgA := zkTestConfig(t, zk, "later", "node-a")
	cfgA.PeerInterval = time.Hour
	lnA := loopbackListener(t)
	a := lnA.Addr().String()
	stopA := startRunOn(t, cfgA, lnA)
	t.Cleanup(func() { _ = stopA() })
	waitHTTP(t, a, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	if _, body := httpGet(t, a, "/cluster/nodes"); strings.Count(body, `"addr"`) != 1 {
		t.Fatalf("node a alone: /cluster/nodes %s, want itself only", body)
	}

	cfgB := zkTestConfig(t, zk, "later", "node-b")
	lnB := loopbackListener(t)
	b := lnB.Addr().String()
	stopB := startRunOn(t, cfgB, lnB)
	t.Cleanup(func() { _ = stopB() })
	waitHTTP(t, b, "/readyz", func(code int, _ string) bool { return code == http.StatusOK })
	// Node b's alive znode exists once it is in service; a's watch fires
	// within moments.
	_, body := waitHTTP(t, a, "/cluster/nodes", func(_ int, body string) bool { return strings.Contains(body, `"addr":"`+b+`"`) })
	if !strings.Contains(body, `"addr":"`+a+`"`) {
		t.Errorf("node a's /cluster/nodes %s lists b but not itself", body)
	}
}
