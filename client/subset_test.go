package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"

	"codeberg.org/snowflaked/snowflaked/client/internal/rendezvous"
)

// startFakes starts n fake nodes and returns them with their addresses.
func startFakes(t *testing.T, n int) ([]*fakeNode, []string) {
	t.Helper()
	nodes := make([]*fakeNode, n)
	addrs := make([]string, n)
	for i := range nodes {
		nodes[i] = startFake(t, int64(i+1), nil)
		addrs[i] = nodes[i].addr
	}
	return nodes, addrs
}

// topAddrs is client id's first k of addrs, in the order of addrs.
func topAddrs(id uint64, addrs []string, k int) []string {
	top := rendezvous.Top(id, addrs, k)
	slices.Sort(top)
	out := make([]string, len(top))
	for i, j := range top {
		out[i] = addrs[j]
	}
	return out
}

// A client talks to its subset only: with Subset k over 10 nodes, its
// requests (sequential and concurrent) go to the first k of its ranking,
// spread over all k, and it never connects to another node.
func TestSubsetRouting(t *testing.T) {
	tests := []struct {
		name string
		k    int
		id   uint64
	}{
		{"k=3", 3, 11},
		{"k=3, another client", 3, 12},
		{"k=1", 1, 13},
		{"k=0: the default, 6", 0, 14},
		{"k above the cluster's size: every node", 64, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes, addrs := startFakes(t, 10)
			c := newClient(t, Config{Servers: addrs, Subset: tt.k, SubsetID: tt.id, MaxInFlight: 4})
			k := tt.k
			if k == 0 {
				k = DefaultSubset
			}
			want := topAddrs(tt.id, addrs, k)
			if got := c.Subset(); !slices.Equal(got, want) || len(got) != min(k, len(addrs)) {
				t.Fatalf("Subset() = %q, want %q", got, want)
			}
			if !slices.Equal(c.Nodes(), addrs) {
				t.Fatalf("Nodes() = %q, want the whole list %q", c.Nodes(), addrs)
			}
			for range 60 {
				if _, err := c.NextN(context.Background(), 2); err != nil {
					t.Fatal(err)
				}
			}
			callConcurrently(t, 16, 20, func(int) (int64, error) { return c.Next(context.Background()) })
			for _, n := range nodes {
				in := slices.Contains(want, n.addr)
				switch r := n.requests.Load(); {
				case in && r == 0:
					t.Errorf("%s is in the subset and got no request", n.addr)
				case !in && (r != 0 || n.conns.Load() != 0):
					t.Errorf("%s is not in the subset and got %d requests, %d connections", n.addr, r, n.conns.Load())
				}
			}
		})
	}
}

// When every node of the subset is down, a batch goes on to the next node
// of the client's ranking, and that one only; a node of the subset that
// fails moves the batch to another of the subset, never beyond it.
func TestSubsetSpill(t *testing.T) {
	const id, k = 21, 3
	tests := []struct {
		name  string
		down  int // how many of the client's first ranked answer 503
		spill bool
	}{
		{"one of the subset down", 1, false},
		{"two of the subset down", 2, false},
		{"the whole subset down", k, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const n = 10
			down := make([]atomic.Bool, n)
			nodes := make([]*fakeNode, n)
			addrs := make([]string, n)
			for i := range nodes {
				nodes[i] = startFake(t, int64(i+1), func(w http.ResponseWriter, r *http.Request, c int) bool {
					return down[i].Load() && unavailable(w, r, c)
				})
				addrs[i] = nodes[i].addr
			}
			rank := rendezvous.Rank(id, addrs)
			for _, r := range rank[:tt.down] {
				down[r].Store(true)
			}
			c := newClient(t, Config{Servers: addrs, Subset: k, SubsetID: id, Attempts: k + 1})
			if _, err := c.NextN(context.Background(), 5); err != nil {
				t.Fatal(err)
			}
			for pos, r := range rank {
				got := nodes[r].requests.Load()
				switch {
				case pos == k && tt.spill && got != 1:
					t.Errorf("rank %d, the first beyond the subset: %d requests, want 1", pos, got)
				case pos > k || (pos == k && !tt.spill):
					if got != 0 {
						t.Errorf("rank %d, beyond the subset: %d requests, want none", pos, got)
					}
				}
			}
		})
	}
}

// A node that leaves the list is replaced by the next of the client's
// ranking, and the rest of the subset stays; a node that joins takes a
// place only where it ranks among the first k.
func TestSubsetFollowsTheList(t *testing.T) {
	const id, k = 31, 3
	addrs := make([]string, 20)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.0.0.%d:8080", i+1)
	}
	d := newFakeDiscovery(addrs...)
	c := newClient(t, Config{Discovery: d, Subset: k, SubsetID: id})
	before := c.Subset()
	rank := rendezvous.Rank(id, addrs)
	gone, next := addrs[rank[0]], addrs[rank[k]]
	left := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == gone })
	d.set(left...)
	eventually(t, "the list changes", func() bool { return len(c.Nodes()) == len(left) })
	after := c.Subset()
	wantAfter := slices.DeleteFunc(slices.Clone(before), func(a string) bool { return a == gone })
	wantAfter = append(wantAfter, next)
	if !sameMembers(after, wantAfter) {
		t.Fatalf("%s left: subset %q, want %q (%s replaced by %s)", gone, after, wantAfter, gone, next)
	}
	d.set(addrs...)
	eventually(t, "the node comes back", func() bool { return len(c.Nodes()) == len(addrs) })
	if got := c.Subset(); !sameMembers(got, before) {
		t.Fatalf("%s came back: subset %q, want %q", gone, got, before)
	}
}

// sameMembers reports whether a and b hold the same strings.
func sameMembers(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Over 1,000 clients with random IDs (SubsetID 0) and 64 nodes, each node
// is in about C·k/n subsets (within 5 standard deviations): the number of
// clients that connect to it, 94 instead of 1,000.
func TestSubsetBalanceOverClients(t *testing.T) {
	const clients, nodes, k = 1000, 64, DefaultSubset
	addrs := make([]string, nodes)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.1.%d.%d:8080", i/200, i%200+1)
	}
	load := map[string]int{}
	for i := range clients {
		cfg := Config{Servers: addrs}
		if i > 0 { // the first keeps the process's ID
			cfg.SubsetID = rendezvous.Weight(uint64(i), "test client") | 1
		}
		c, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range c.Subset() {
			load[a]++
		}
		_ = c.Close()
	}
	mean := float64(clients*k) / nodes
	sd := math.Sqrt(mean * (1 - float64(k)/nodes))
	lo, hi := clients, 0
	for _, a := range addrs {
		l := load[a]
		lo, hi = min(lo, l), max(hi, l)
		if math.Abs(float64(l)-mean) > 5*sd {
			t.Errorf("%s is in %d subsets, want %.0f±%.0f", a, l, mean, 5*sd)
		}
	}
	t.Logf("%d clients, %d nodes, Subset %d: %d..%d clients per node (mean %.1f; without subsets %d)", clients, nodes, k, lo, hi, mean, clients)
}

// Subset out of 0..MaxSubset is ErrInvalidConfig.
func TestSubsetConfig(t *testing.T) {
	for _, k := range []int{-1, MaxSubset + 1} {
		if _, err := New(context.Background(), Config{Servers: []string{"a:1"}, Subset: k}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Subset %d: %v, want ErrInvalidConfig", k, err)
		}
	}
}
