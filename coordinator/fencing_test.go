package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/health"
	"codeberg.org/snowflaked/snowflaked/snowflake"
	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
	"codeberg.org/snowflaked/snowflaked/tests/zkproxy"
)

// The issue-8 scenario at the coordinator: A is cut off from a ZooKeeper
// that keeps running; its session expires; B, with the same node key,
// claims the worker ID. B must start after every fence A was ever handed,
// A must never be handed a larger one (it stops there), and once A can
// talk to ZooKeeper again it learns it was taken over and stays out.
func TestIntegration_PartitionedHolderFencedOutBySameKeyTakeOver(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	px := zkproxy.Start(t, srv[0])
	cfgA := testConfig(t, []string{px.Addr()}, "k")
	a := newCoord(t, cfgA)
	idA := mustClaim(t, a)
	fsA := &testFence{}
	gA, _ := attachAndRun(t, a, fsA)
	waitFor(t, waitLong, "A in service with a renewal", func() bool { return gA.Ready() && a.Status().Reports >= 2 })

	px.Block()
	cutAt := time.Now().UnixMilli()
	raw := rawConn(t, srv, "")
	lease := fmt.Sprintf("/snowflaked/test/leases/%d", idA.WorkerID)
	waitFor(t, waitLong, "A's session to expire (lease gone)", func() bool { ok, _ := exists(t, raw, lease); return !ok })
	maxA := fsA.zk.Load() // the largest fence A can ever issue up to, unless a renewal gets through

	b := newCoord(t, testConfig(t, srv, "k"))
	idB := mustClaim(t, b)
	if idB.WorkerID != idA.WorkerID {
		t.Fatalf("B got worker ID %d, A had %d", idB.WorkerID, idA.WorkerID)
	}
	if idB.PrevFence < snowflake.UnixMilli(maxA) {
		t.Fatalf("B starts after %d, but A may issue up to %d: overlap", idB.PrevFence, maxA)
	}
	if idB.PrevToken != idA.Token {
		t.Fatalf("B replaced token %q, want A's %q", idB.PrevToken, idA.Token)
	}
	if lead := maxA - cutAt; lead > cfgA.ZKFenceAhead.Milliseconds()+testReport.Milliseconds() {
		t.Fatalf("A may issue %dms past the cut, more than G %v", lead, cfgA.ZKFenceAhead)
	}

	// A reconnects: its renewal fails on the version, it is blocked, and it
	// is never handed a fence beyond maxA.
	px.Unblock()
	waitFor(t, waitLong, "A to learn it was taken over", func() bool {
		d, ok := gA.Failing()[health.ReasonLeaseLost]
		return ok && strings.Contains(d, "claimed by another process")
	})
	for range 5 {
		if fsA.zk.Load() != maxA || gA.Ready() {
			t.Fatalf("A after the take-over: fence %d (was %d), ready %v", fsA.zk.Load(), maxA, gA.Ready())
		}
		time.Sleep(testReport)
	}
	if st := a.Status(); st.LeaseHeld || !strings.Contains(st.LeaseDetail, idB.Token) || snowflake.UnixMilli(st.ZKFence) != snowflake.UnixMilli(maxA) {
		t.Fatalf("A's status after the take-over: %+v", st)
	}
}

// A write to our forever znode by someone else (same worker ID, another
// token) is a take-over, never adopted as our own.
func TestIntegration_ForeignWriteToOwnZnodeIsATakeOver(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	c := newCoord(t, testConfig(t, srv, "victim"))
	id := mustClaim(t, c)
	fs := &testFence{}
	g, _ := attachAndRun(t, c, fs)
	waitFor(t, waitLong, "in service", func() bool { return g.Ready() && c.Status().Reports >= 1 })

	raw := rawConn(t, srv, "")
	d, st := readForeverData(t, raw, id.Path)
	d.Token = "someone-else"
	d.Fence += 60_000
	writeForeverData(t, raw, id.Path, d, st.Version)
	waitFor(t, waitLong, "the foreign write to block the lease", func() bool {
		r, ok := g.Failing()[health.ReasonLeaseLost]
		return ok && strings.Contains(r, "someone-else")
	})
	if got := fs.zk.Load(); snowflake.UnixMilli(got) >= d.Fence {
		t.Fatalf("the node adopted the foreign fence %d", got)
	}
}

// A restart on the same disk (Prior.Session = the dead predecessor's
// session) removes the predecessor's lease at once instead of waiting for
// the session to expire.
func TestIntegration_PriorSessionLeaseRemovedAtOnce(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	px := zkproxy.Start(t, srv[0])
	cfg := testConfig(t, []string{px.Addr()}, "disk")
	cfg.SessionTimeout = 8 * time.Second // long: waiting it out would show
	dead := newCoord(t, cfg)
	id := mustClaim(t, dead)
	px.Block() // the process "dies": its session lives on in ZooKeeper

	succ := newCoord(t, testConfig(t, srv, "disk"))
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	sid, err := succ.Claim(ctx, Prior{Session: id.Session, Incarnation: id.Incarnation})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > cfg.SessionTimeout*3/4 { // waited out, it would take the whole timeout
		t.Fatalf("Claim took %v: the predecessor's lease was waited out, not removed", took)
	}
	if sid.WorkerID != id.WorkerID || sid.PrevToken != id.Token {
		t.Fatalf("successor %+v, predecessor %+v", sid, id)
	}

	// A lease of a session the cache file does not name is never removed.
	px2 := zkproxy.Start(t, srv[0])
	cfg2 := testConfig(t, []string{px2.Addr()}, "disk2")
	cfg2.SessionTimeout = 8 * time.Second
	holder := newCoord(t, cfg2)
	hid := mustClaim(t, holder)
	px2.Block()
	other := testConfig(t, srv, "disk2")
	other.SessionTimeout = 2 * time.Second
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	_, err = newCoord(t, other).Claim(ctx2, Prior{Session: "0x1234", Incarnation: hid.Incarnation})
	if err == nil {
		t.Fatal("a lease of an unrelated session was taken")
	}
}

// The cluster znode's incarnation and shared settings.
func TestIntegration_IncarnationAndClusterSettings(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	first := mustClaim(t, newCoord(t, testConfig(t, srv, "n1")))
	if len(first.Incarnation) != 32 {
		t.Fatalf("incarnation %q", first.Incarnation)
	}
	tests := []struct {
		name    string
		prior   Prior
		recycle time.Duration
		wantErr error
		want    []string
	}{
		{name: "same incarnation", prior: Prior{Incarnation: first.Incarnation}},
		{name: "no recorded incarnation", prior: Prior{}},
		{name: "another incarnation", prior: Prior{Incarnation: "0123"}, wantErr: ErrIncarnationMismatch,
			want: []string{"0123", first.Incarnation, "--accept-new-incarnation"}},
		{name: "another incarnation accepted", prior: Prior{Incarnation: "0123", AcceptIncarnation: true}},
		{name: "another recycle-after", recycle: 5 * time.Minute, wantErr: ErrClusterMismatch, want: []string{"1h0m0s", "5m0s"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, srv, fmt.Sprintf("k%d", i))
			if tc.recycle != 0 {
				cfg.RecycleAfter = tc.recycle
			}
			id, err := newCoord(t, cfg).Claim(context.Background(), tc.prior)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Claim: %v, want %v", err, tc.wantErr)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if tc.wantErr == nil && id.Incarnation != first.Incarnation {
				t.Errorf("incarnation %q, want %q", id.Incarnation, first.Incarnation)
			}
		})
	}
	// An old cluster znode (layout only) gets an incarnation once, kept by all.
	raw := rawConn(t, srv, "")
	if _, err := raw.Set("/snowflaked/test", []byte(`{"layout":"41/10/12","epoch":"2024-01-01T00:00:00Z","time_unit":"1ms"}`), -1); err != nil {
		t.Fatal(err)
	}
	a := mustClaim(t, newCoord(t, testConfig(t, srv, "upgraded-a")))
	b := mustClaim(t, newCoord(t, testConfig(t, srv, "upgraded-b")))
	if a.Incarnation == "" || a.Incarnation != b.Incarnation || a.Incarnation == first.Incarnation {
		t.Fatalf("incarnations after the upgrade: %q, %q (before %q)", a.Incarnation, b.Incarnation, first.Incarnation)
	}
}

// A lease of this node key whose holder shows no sign of life
// (its session lingers, as after kill -9 during a ZooKeeper election, but
// its forever znode is not renewed) does not make the claim fail: after
// watching it for the stale-lease wait, the claim commits without the
// lease (its token fences the holder out), the node stays out with
// lease_lost, and takes the lease by itself once the stale one expires.
func TestIntegration_StaleLeaseOfADeadLookingHolderIsWaitedOutNotFatal(t *testing.T) {
	srv := serversOf(zkharness.StartStandalone(t))
	px := zkproxy.Start(t, srv[0])
	cfgA := testConfig(t, []string{px.Addr()}, "lingering")
	cfgA.SessionTimeout = 8 * time.Second // lingers far longer than B watches
	a := newCoord(t, cfgA)
	idA := mustClaim(t, a)
	px.Block() // A "dies": no renewals, its session lives on

	b := newCoord(t, testConfig(t, srv, "lingering")) // 2s session: watches ~3s
	began := time.Now()
	idB := mustClaim(t, b)
	claimTook := time.Since(began)
	if idB.WorkerID != idA.WorkerID || idB.Session != "" || idB.PrevToken != idA.Token || idB.PrevFence < idA.ZKFence {
		t.Fatalf("B's claim %+v over A's %+v: want the same worker ID, no lease yet, after A's fence", idB, idA)
	}
	g, _ := attachAndRun(t, b, &testFence{})
	if d, ok := g.Failing()[health.ReasonLeaseLost]; !ok || !strings.Contains(d, "no sign of life") {
		t.Fatalf("B before the stale lease expired: lease_lost %q (%v)", d, ok)
	}
	waitFor(t, 2*cfgA.SessionTimeout, "B to take the lease once A's session expired", func() bool {
		st := b.Status()
		return st.LeaseHeld && st.LeaseSession != "" && g.Ready()
	})
	t.Logf("B claimed after watching %s, took the lease %s after starting", claimTook.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}
