package fencing

import (
	"errors"
	"math"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/snowflake"
)

func TestClaim(t *testing.T) {
	tests := []struct {
		name string
		prev Record
		now  snowflake.UnixMilli
		want Record
	}{
		{"fresh znode", Record{}, 1000, Record{Token: "new", Fence: 1300}},
		{"previous fence behind now", Record{Token: "old", Fence: 900}, 1000, Record{Token: "new", Fence: 1300, PrevToken: "old", PrevFence: 900}},
		{"previous fence ahead of now + G (clock behind)", Record{Token: "old", Fence: 5000}, 1000, Record{Token: "new", Fence: 5000, PrevToken: "old", PrevFence: 5000}},
		{"previous claim's own prev is dropped", Record{Token: "old", Fence: 900, PrevToken: "older", PrevFence: 100}, 1000, Record{Token: "new", Fence: 1300, PrevToken: "old", PrevFence: 900}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Claim(tc.prev, "new", tc.now, 300*time.Millisecond); got != tc.want {
				t.Fatalf("Claim = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRenew(t *testing.T) {
	tests := []struct{ acked, now, want snowflake.UnixMilli }{
		{acked: 1000, now: 900, want: 1200},
		{acked: 5000, now: 900, want: 5000}, // the clock went back: never less than acknowledged
		{acked: 0, now: 0, want: 300},
	}
	for _, tc := range tests {
		if got := Renew(tc.acked, tc.now, 300*time.Millisecond); got != tc.want {
			t.Errorf("Renew(%d, %d, 300) = %d, want %d", tc.acked, tc.now, got, tc.want)
		}
	}
}

func TestAdopt(t *testing.T) {
	tests := []struct {
		name                  string
		readWorker, ownWorker int64
		readToken, ownToken   string
		want                  bool
	}{
		{"own write whose answer was lost", 3, 3, "t", "t", true},
		{"another token: taken over", 3, 3, "u", "t", false},
		{"recycled away (worker -1), token kept by the eviction", -1, 3, "t", "t", false},
		{"no token of our own", 3, 3, "", "", false},
	}
	for _, tc := range tests {
		if got := Adopt(tc.readWorker, tc.ownWorker, tc.readToken, tc.ownToken); got != tc.want {
			t.Errorf("%s: Adopt = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestStartAfter(t *testing.T) {
	claim := Record{Token: "t2", Fence: 9000, PrevToken: "t1", PrevFence: 8000}
	tests := []struct {
		name      string
		cache     Cache
		want      snowflake.UnixMilli
		fromCache bool
	}{
		{"no matching cache file", Cache{Token: "t1", Fence: 100}, 8000, false},
		{"claim replaced the cache file's token: its tighter fence", Cache{Matches: true, Token: "t1", Fence: 2000}, 2000, true},
		{"another token since the cache file", Cache{Matches: true, Token: "t0", Fence: 2000}, 8000, false},
		{"another token, cache file ahead", Cache{Matches: true, Token: "t0", Fence: 8500}, 8500, true},
		{"file without a token: the larger", Cache{Matches: true, Fence: 2000}, 8000, false},
		{"file without a token, ahead", Cache{Matches: true, Fence: 8100}, 8100, true},
	}
	for _, tc := range tests {
		got, fromCache := StartAfter(claim, tc.cache)
		if got != tc.want || fromCache != tc.fromCache {
			t.Errorf("%s: StartAfter = %d, %v; want %d, %v", tc.name, got, fromCache, tc.want, tc.fromCache)
		}
	}
}

// recGen records what the Gate hands a generator.
type recGen struct {
	fence, floor, last snowflake.UnixMilli
	floorErr           error
}

func (g *recGen) SetFence(ms snowflake.UnixMilli) { g.fence = ms }
func (g *recGen) RaiseFloor(ms snowflake.UnixMilli) error {
	if g.floorErr != nil {
		return g.floorErr
	}
	g.floor = max(g.floor, ms)
	return nil
}
func (g *recGen) LastIssued() snowflake.UnixMilli { return g.last }

func TestGate(t *testing.T) {
	g := &recGen{fence: -1}
	gate := NewGate(g, 5000)
	if g.fence != 0 {
		t.Fatalf("before any local fence the generator's fence is %d, want 0 (nothing issued)", g.fence)
	}
	steps := []struct {
		name      string
		do        func()
		wantFence snowflake.UnixMilli
	}{
		{"local below zk", func() { gate.SetFence(3000) }, 3000},
		{"local above zk", func() { gate.SetFence(7000) }, 5000},
		{"zk moves up", func() { gate.SetZKFence(6000) }, 6000},
		{"zk never lowers", func() { gate.SetZKFence(100) }, 6000},
		{"local never lowers", func() { gate.SetFence(10) }, 6000},
	}
	for _, s := range steps {
		s.do()
		if g.fence != s.wantFence {
			t.Fatalf("%s: generator fence %d, want %d", s.name, g.fence, s.wantFence)
		}
	}
	if gate.zkFence() != 6000 {
		t.Fatalf("ZKFence %d", gate.zkFence())
	}
	if err := gate.RaiseFloor(4000); err != nil || g.floor != 4000 {
		t.Fatalf("RaiseFloor: %v, floor %d", err, g.floor)
	}
	g.floorErr = errors.New("past the end")
	if err := gate.RaiseFloor(1); err == nil {
		t.Fatal("RaiseFloor hid the generator's error")
	}
	g.last = 4321
	if last := gate.Freeze(); last != 4321 || g.fence != 4321 || gate.LastIssued() != 4321 {
		t.Fatalf("Freeze = %d, generator fence %d", last, g.fence)
	}
	gate.SetFence(99_999)
	gate.SetZKFence(99_999)
	if g.fence != 4321 {
		t.Fatalf("a frozen gate moved the fence to %d", g.fence)
	}

	standalone := &recGen{}
	sg := NewGate(standalone, NoZKFence)
	sg.SetZKFence(10)
	sg.SetFence(8000)
	if standalone.fence != 8000 || sg.zkFence() != math.MaxInt64 {
		t.Fatalf("standalone gate: fence %d, zk %d", standalone.fence, sg.zkFence())
	}
}
