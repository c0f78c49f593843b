package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sfclient "codeberg.org/snowflaked/snowflaked/client"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/segment"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// Opaque tags on a real 3-node cluster run with --zk-auth: 8-digit numbers
// from HTTP, the client and snowflakectl, all distinct and none with a
// leading zero; the key is readable with the cluster's credentials only
// and shows nowhere (logs, /status, /metrics, segment status);
// snowflakectl segment decode gives the counter back.
func TestIntegration_OpaqueTagCluster(t *testing.T) {
	const auth = "ops:s3cret"
	zk := zkharness.StartStandalone(t)
	var nodes []*proc
	var dirs []string
	for i := range 3 {
		dirs = append(dirs, t.TempDir())
		p := startNode(t, binSnowflaked, clusterArgs(dirs[i], zk.ConnectString(), "opaque", "node-"+strconv.Itoa(i), "--zk-auth", auth))
		nodes = append(nodes, p)
	}
	for _, p := range nodes {
		p.waitReadyz(http.StatusOK, readyTimeout)
	}
	code, out, errOut := ctl(t, "segment", "create", "acct", "--opaque", "--digits", "8", "--step", "50", "--zk", zk.ConnectString(), "--cluster", "opaque", "--zk-auth", auth)
	if code != 0 || !strings.Contains(out, "opaque: 8-digit numbers") || strings.Contains(errOut, "WARNING") {
		t.Fatalf("segment create --opaque: %d %s %s", code, out, errOut)
	}
	seen := opaqueSeen{}
	dense := takeOpaqueFromEach(t, nodes, seen)
	checkNotTheCounter(t, dense)
	c, err := sfclient.New(context.Background(), sfclient.Config{Discovery: zkDiscovery(t, zk, "opaque", auth)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids, err := c.NextSegmentN(context.Background(), "acct", 20)
	if err != nil {
		t.Fatal(err)
	}
	seen.add(t, "client", ids)

	// A restart of node 0 (SIGTERM: it returns its unissued range) hands
	// out nothing twice.
	nodes[0].signal(syscall.SIGTERM)
	if code := nodes[0].exitCode(); code != 0 {
		t.Fatalf("node 0 exit %d", code)
	}
	again := startNode(t, binSnowflaked, clusterArgs(dirs[0], zk.ConnectString(), "opaque", "node-0", "--zk-auth", auth))
	again.waitReadyz(http.StatusOK, readyTimeout)
	nodes[0] = again
	testsupport.Poll(t, readyTimeout, pollEvery, "segment mode ready after the restart", func() bool {
		code, _ := again.get("/readyz/segment")
		return code == http.StatusOK
	})
	code, body := again.get("/segment/acct?count=300")
	if code != http.StatusOK {
		t.Fatalf("after restart: %d %s", code, body)
	}
	var after []int64
	for _, f := range strings.Fields(body) {
		id, _ := strconv.ParseInt(f, 10, 64)
		after = append(after, id)
	}
	seen.add(t, "node 0 after its restart", after)

	checkOpaqueKeyHidden(t, zk, auth, nodes)
	checkOpaqueDecode(t, zk, auth, dense[5])

	// Without --zk-auth, creating one says plainly that the key is open.
	zk2 := zkharness.StartStandalone(t)
	p := startNode(t, binSnowflaked, clusterArgs(t.TempDir(), zk2.ConnectString(), "open", "node-x"))
	p.waitReadyz(http.StatusOK, readyTimeout)
	_, _, errOut = ctl(t, "segment", "create", "acct", "--opaque", "--digits", "6", "--zk", zk2.ConnectString(), "--cluster", "open")
	if !strings.Contains(errOut, "anyone who reaches ZooKeeper can read it") {
		t.Errorf("no warning about the open key: %s", errOut)
	}
}

// opaqueSeen holds the opaque numbers handed out so far.
type opaqueSeen map[int64]bool

// add fails unless every one of ids, from src, is a fresh 8-digit number.
func (seen opaqueSeen) add(t *testing.T, src string, ids []int64) {
	t.Helper()
	for _, id := range ids {
		if id < 10_000_000 || id > 99_999_999 || seen[id] {
			t.Fatalf("%s: %d is not a fresh 8-digit number", src, id)
		}
		seen[id] = true
	}
}

// takeOpaqueFromEach takes 300 numbers of tag acct from each node over
// HTTP and returns them all, node by node, in the order served.
func takeOpaqueFromEach(t *testing.T, nodes []*proc, seen opaqueSeen) []int64 {
	t.Helper()
	var dense []int64
	for i, p := range nodes {
		code, body := p.get("/segment/acct?count=300")
		if code != http.StatusOK {
			t.Fatalf("node %d: %d %s", i, code, body)
		}
		var ids []int64
		for _, f := range strings.Fields(body) { // in no order: not parseIDs
			id, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("node %d: %q: %v", i, f, err)
			}
			ids = append(ids, id)
		}
		seen.add(t, "node "+strconv.Itoa(i), ids)
		dense = append(dense, ids...)
	}
	return dense
}

// checkNotTheCounter: consecutive numbers of one node are far apart.
func checkNotTheCounter(t *testing.T, dense []int64) {
	t.Helper()
	close := 0
	for i := 1; i < 300; i++ {
		if d := dense[i] - dense[i-1]; d > -1000 && d < 1000 {
			close++
		}
	}
	if close > 3 {
		t.Errorf("%d of 299 neighbours within 1000 of each other: not opaque", close)
	}
}

// checkOpaqueKeyHidden: the key is readable with the credentials only, and
// shows nowhere else (/status, /metrics, segment status, the logs).
func checkOpaqueKeyHidden(t *testing.T, zk *zkharness.Cluster, auth string, nodes []*proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func(auth string) *segment.ZKStore {
		st, err := segment.OpenZK(ctx, segment.ZKConfig{Servers: []string{zk.ConnectString()}, Cluster: "opaque", Auth: auth, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	withAuth := open(auth)
	acct, err := withAuth.Tag(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	key, err := withAuth.Key(ctx, "acct", acct.Incarnation)
	if err != nil {
		t.Fatalf("key with the credentials: %v", err)
	}
	if _, err := open("").Key(ctx, "acct", acct.Incarnation); err == nil || !strings.Contains(err.Error(), "--zk-auth") {
		t.Errorf("key read without credentials: %v", err)
	}
	_, status := nodes[0].get("/status")
	_, metrics := nodes[0].get("/metrics")
	_, segStatus, _ := ctl(t, "segment", "status", "acct", "--json", "--zk", zk.ConnectString(), "--cluster", "opaque")
	_, password, _ := strings.Cut(auth, ":")
	for _, form := range []string{hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key), string(key), password} {
		for where, text := range map[string]string{"/status": status, "/metrics": metrics, "segment status": segStatus,
			"node 0's log": nodes[0].Output(), "node 1's log": nodes[1].Output(), "node 2's log": nodes[2].Output()} {
			if strings.Contains(text, form) {
				t.Errorf("the key or the --zk-auth password (%q) shows in %s", form, where)
			}
		}
	}
}

// checkOpaqueDecode: segment decode of some gives the counter with the
// credentials and is refused without.
func checkOpaqueDecode(t *testing.T, zk *zkharness.Cluster, auth string, some int64) {
	t.Helper()
	code, out, errOut := ctl(t, "segment", "decode", "acct", strconv.FormatInt(some, 10), "--zk", zk.ConnectString(), "--cluster", "opaque", "--zk-auth", auth)
	if code != 0 || !strings.Contains(out, "is number ") || !strings.Contains(out, "handed out") {
		t.Errorf("segment decode: %d %s %s", code, out, errOut)
	}
	if code, _, errOut = ctl(t, "segment", "decode", "acct", strconv.FormatInt(some, 10), "--zk", zk.ConnectString(), "--cluster", "opaque"); code == 0 || !strings.Contains(errOut, "--zk-auth") {
		t.Errorf("segment decode without credentials: %d %s", code, errOut)
	}
}
