package coordinator

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/internal/testsupport"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// A closed loopback port: Claim gives up with ErrZKUnavailable within the
// connect timeout, and the coordinator can still resume from a cache.
func TestClaimUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := testConfig(t, []string{addr}, "n")
	cfg.ConnectTimeout = 500 * time.Millisecond
	c := newCoord(t, cfg)
	began := time.Now()
	_, err = c.Claim(context.Background(), Prior{})
	if !errors.Is(err, ErrZKUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Claim: %v, want ErrZKUnavailable naming %s", err, addr)
	}
	if took := time.Since(began); took > cfg.ConnectTimeout+2*time.Second {
		t.Fatalf("Claim took %v, connect timeout %v", took, cfg.ConnectTimeout)
	}
	if _, err := c.PeerIDs(context.Background()); !errors.Is(err, ErrZKUnavailable) {
		t.Fatalf("PeerIDs without a session: %v", err)
	}
	if st := c.Status(); st.Connected || st.LeaseHeld || st.WorkerID != -1 || st.LastReportAgeMs != -1 {
		t.Fatalf("status %+v", st)
	}
}

func TestMisuseIsAnErrorNotAPanic(t *testing.T) {
	cfg := testConfig(t, []string{"127.0.0.1:1"}, "n")
	c := newCoord(t, cfg)
	fs := &testFence{}
	if err := c.Run(context.Background(), fs); err == nil || !strings.Contains(err.Error(), "Attach") {
		t.Fatalf("Run before Attach: %v", err)
	}
	g := health.New(testsupport.Log(t, nil), nil)
	c.Attach(g)
	c.Attach(g) // second Attach: ignored with an error log
	if err := c.Run(context.Background(), fs); err == nil || !strings.Contains(err.Error(), "Claim or ResumeFromCache") {
		t.Fatalf("Run before Claim: %v", err)
	}
	if err := c.Run(context.Background(), nil); err == nil {
		t.Fatal("Run with a nil fence source: no error")
	}
	for _, r := range []Resume{{WorkerID: -1}, {WorkerID: 1024}, {WorkerID: 1, LastReport: -5}, {WorkerID: 1, Token: "t", ZKFence: -1}} {
		if err := c.ResumeFromCache(r); err == nil {
			t.Fatalf("ResumeFromCache(%+v): no error", r)
		}
	}
	// A cache file from before fencing tokens grants no ZooKeeper fence:
	// zk_fence fails (nothing may be issued) until ZooKeeper answers.
	if err := c.ResumeFromCache(Resume{WorkerID: 3, ZKFence: snowflake.UnixMilli(time.Now().UnixMilli() + 60_000)}); err != nil {
		t.Fatal(err)
	}
	if d, ok := g.Failing()[health.ReasonZKFence]; !ok || !strings.Contains(d, "unreachable at start") {
		t.Fatalf("zk_fence after resuming without a token: %q, %v", d, ok)
	}
	if st := c.Status(); st.ZKFence != 0 || !st.FromCache {
		t.Fatalf("status after resuming without a token: %+v", st)
	}
	if _, failing := g.Failing()[health.ReasonLeaseLost]; failing {
		t.Fatal("lease_lost fails while serving from the cache with ZooKeeper away")
	}
	if err := c.ResumeFromCache(Resume{WorkerID: 3}); err == nil {
		t.Fatal("second ResumeFromCache: no error")
	}
	if _, err := c.Claim(context.Background(), Prior{}); err == nil {
		t.Fatal("Claim after ResumeFromCache: no error")
	}
	if err := c.Close(context.Background(), 0); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(context.Background(), 0); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := c.Run(context.Background(), fs); err == nil {
		t.Fatal("Run after Close: no error")
	}
}

// Status copies the failure counts under the lock: reading it while
// renewals fail is no data race (go test -race).
func TestStatusWhileRenewalsFail(t *testing.T) {
	c := newCoord(t, testConfig(t, []string{"127.0.0.1:1"}, "n"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			c.recordRenewFailure([]string{"connection", "taken_over", "other"}[i%3], "test")
		}
	}()
	for range 200 {
		_ = c.Status()
	}
	<-done
	st := c.Status()
	if st.ReportFailures != 200 || st.FailuresByCause["connection"] != 67 || st.FailuresByCause["taken_over"] != 67 || st.RenewError != "taken_over: test" {
		t.Fatalf("status %+v", st)
	}
}
