package node

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// While the claim waits (here for a ZooKeeper that never answers) the
// port answers: /healthz 200, /readyz 503 starting with what the node waits
// for, /id 503 with a JSON code. Once Run returns, the port is closed.
func TestRunAnswersWhileTheClaimWaits(t *testing.T) {
	dead := loopbackListener(t) // a port that accepts and never speaks ZooKeeper
	cfg := defaultConfig()
	cfg.ZK, cfg.Cluster, cfg.NodeKey = dead.Addr().String(), "starting", "node-s"
	cfg.Listen = "127.0.0.1:0"
	cfg.CacheFile = filepath.Join(t.TempDir(), "cache.json")
	cfg.ZKSessionTimeout = time.Minute // the claim waits that long for a session: longer than the test
	ln := loopbackListener(t)
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, withSeams(cfg, withListener(ln)), zerolog.Nop()) }()

	// The claim starts a moment after the port opens: until then the
	// detail is "starting".
	waitHTTP(t, addr, "/readyz", func(code int, body string) bool {
		return code == http.StatusServiceUnavailable && strings.Contains(body, "connecting to ZooKeeper")
	})
	tests := []struct {
		path     string
		want     int
		contains []string
	}{
		{"/healthz", http.StatusOK, []string{`"status":"ok"`}},
		{"/readyz", http.StatusServiceUnavailable, []string{`"state":"starting"`, `"reason":"starting"`, "connecting to ZooKeeper " + dead.Addr().String()}},
		{"/id", http.StatusServiceUnavailable, []string{`"code":"out_of_service"`, `"state":"starting"`, "connecting to ZooKeeper"}},
		{"/clock", http.StatusServiceUnavailable, []string{`"code":"out_of_service"`}},
	}
	for _, tc := range tests {
		code, body := httpGet(t, addr, tc.path)
		if code != tc.want {
			t.Errorf("GET %s while the claim waits: %d %s, want %d", tc.path, code, body, tc.want)
		}
		for _, s := range tc.contains {
			if !strings.Contains(body, s) {
				t.Errorf("GET %s: %s lacks %s", tc.path, body, s)
			}
		}
	}
	cancel() // stopped before serving: Run returns nil
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run stopped while claiming: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("the port still accepts after Run returned")
	}
}

// The hand-over: a connection made while no server serves waits for the
// next one (it is never refused), closing a view leaves the listener
// open, and closing the hand-off closes it.
func TestHandoffKeepsConnectionsBetweenServers(t *testing.T) {
	ln := loopbackListener(t)
	h := newHandoff(ln)
	first := h.view()
	go serveText(first, "first")
	if got := fetch(t, ln.Addr().String()); got != "first" {
		t.Fatalf("first server answered %q", got)
	}
	first.Close()
	// Between the servers: the connection is made, and waits.
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial between the servers: %v", err)
	}
	defer c.Close()
	second := h.view()
	go serveText(second, "second")
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(c); err != nil || string(b) != "second" {
		t.Fatalf("the connection made between the servers got %q (%v), want the second server's answer", b, err)
	}
	second.Close()
	h.close()
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the listener accepts after the hand-off was closed")
	}
}

// serveText answers every connection of ln with text, until ln is closed.
func serveText(ln net.Listener, text string) {
	for i := 0; i < 100; i++ {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, text)
		c.Close()
	}
}

// fetch connects to addr and reads what it says until it closes.
func fetch(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Errorf("dial %s: %v", addr, err)
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Errorf("read from %s: %v", addr, err)
	}
	return string(b)
}

// TestStartPhaseHandedOverAtOnceStops: a node that starts within
// microseconds hands the port over before the start phase's server has
// registered its listener. That server must stop all the same: if it went
// on serving beside the node's server it would take some connections for
// good (and answer them 503 starting).
func TestStartPhaseHandedOverAtOnceStops(t *testing.T) {
	for i := range 30 {
		ln := loopbackListener(t)
		n := &node{log: zerolog.Nop(), timers: context.Background()}
		p, err := n.startServing(ln)
		if err != nil {
			t.Fatal(err)
		}
		next := p.handOver()
		go serveText(next, "node")
		for j := range 4 {
			if got := fetch(t, ln.Addr().String()); got != "node" {
				t.Fatalf("round %d, connection %d after the hand-over got %q, want the node's server", i, j, got)
			}
		}
		next.Close()
		p.closeListener()
	}
}
