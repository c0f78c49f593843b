package rendezvous

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"testing"
)

// workerKeys are the keys zkdiscovery ranks: worker IDs in decimal.
func workerKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	return keys
}

// addrKeys are the keys the client ranks for a static list: addresses.
func addrKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1)
	}
	return keys
}

// subset is the keys of client id's top k, as a set.
func subset(id uint64, keys []string, k int) map[string]bool {
	out := map[string]bool{}
	for _, i := range Top(id, keys, k) {
		out[keys[i]] = true
	}
	return out
}

// Over 1,000 clients, every node is in about C·k/n subsets: each node's load
// within 5 standard deviations of the mean (binomial, p = k/n), for worker
// IDs and addresses, several k and n. A hash that ranks alike for every
// client (load C or 0) or favours some keys fails.
func TestBalance(t *testing.T) {
	const clients = 1000
	tests := []struct {
		name string
		keys []string
		k    int
	}{
		{"64 worker IDs, k=6", workerKeys(64), 6},
		{"64 worker IDs, k=1", workerKeys(64), 1},
		{"64 addresses, k=6", addrKeys(64), 6},
		{"64 addresses, k=3", addrKeys(64), 3},
		{"1024 worker IDs, k=8", workerKeys(1024), 8},
		{"10 addresses, k=3", addrKeys(10), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load := map[string]int{}
			for id := uint64(1); id <= clients; id++ {
				top := Top(id, tt.keys, tt.k)
				if len(top) != tt.k {
					t.Fatalf("client %d: %d nodes, want %d", id, len(top), tt.k)
				}
				for _, i := range top {
					load[tt.keys[i]]++
				}
			}
			n := float64(len(tt.keys))
			mean := clients * float64(tt.k) / n
			sd := math.Sqrt(clients * float64(tt.k) / n * (1 - float64(tt.k)/n))
			lo, hi := mean-5*sd, mean+5*sd
			minL, maxL := clients, 0
			for _, key := range tt.keys {
				l := load[key]
				minL, maxL = min(minL, l), max(maxL, l)
				if float64(l) < lo || float64(l) > hi {
					t.Errorf("node %s in %d subsets, want %.0f..%.0f (mean %.1f)", key, l, lo, hi, mean)
				}
			}
			t.Logf("%d clients: subsets per node %d..%d, mean %.1f", clients, minL, maxL, mean)
		})
	}
}

// A node that leaves moves only the clients that had it, each to exactly
// one new node, the one it ranked k+1st; the others keep their subset.
// (Read backwards, the same check is a node that joins: it takes a place
// only where it ranks among the first k, displacing one node.)
func TestMinimalMovement(t *testing.T) {
	const clients, k = 1000, 6
	tests := []struct {
		name string
		keys []string
		gone int // index of the node that leaves
	}{
		{"worker IDs", workerKeys(64), 17},
		{"addresses", addrKeys(64), 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			left := slices.Delete(slices.Clone(tt.keys), tt.gone, tt.gone+1)
			gone := tt.keys[tt.gone]
			moved := 0
			for id := uint64(1); id <= clients; id++ {
				before, after := subset(id, tt.keys, k), subset(id, left, k)
				var added, removed []string
				for key := range after {
					if !before[key] {
						added = append(added, key)
					}
				}
				for key := range before {
					if !after[key] {
						removed = append(removed, key)
					}
				}
				if !before[gone] {
					if len(added)+len(removed) != 0 {
						t.Fatalf("client %d did not have %s but moved: +%q -%q", id, gone, added, removed)
					}
					continue
				}
				moved++
				next := tt.keys[Rank(id, tt.keys)[k]] // ranked k+1st before
				if !slices.Equal(removed, []string{gone}) || !slices.Equal(added, []string{next}) {
					t.Fatalf("client %d had %s: +%q -%q, want +[%s] -[%s]", id, gone, added, removed, next, gone)
				}
			}
			if moved == 0 || moved > clients*2*k/len(tt.keys) {
				t.Fatalf("%d of %d clients moved, want about %d", moved, clients, clients*k/len(tt.keys))
			}
			t.Logf("%s left: %d of %d clients moved one node each (C·k/n = %d)", gone, moved, clients, clients*k/len(tt.keys))
		})
	}
}

// The ranking is a pure function of the ID and the keys: the same in any
// order of the keys; different clients rank differently; Top of more than
// there are is all of them.
func TestRankIsStable(t *testing.T) {
	keys := workerKeys(32)
	r := Rank(42, keys)
	rev := slices.Clone(keys)
	slices.Reverse(rev)
	var a, b []string
	for _, i := range r {
		a = append(a, keys[i])
	}
	for _, i := range Rank(42, rev) {
		b = append(b, rev[i])
	}
	if !slices.Equal(a, b) {
		t.Fatalf("the ranking depends on the keys' order:\n%q\n%q", a, b)
	}
	if slices.Equal(r, Rank(43, keys)) {
		t.Fatal("clients 42 and 43 rank the nodes alike")
	}
	for _, tt := range []struct{ k, want int }{{0, 0}, {-1, 0}, {5, 5}, {32, 32}, {100, 32}} {
		if got := len(Top(42, keys, tt.k)); got != tt.want {
			t.Errorf("Top(k=%d) has %d keys, want %d", tt.k, got, tt.want)
		}
	}
	if first := ProcessID(); first == 0 || ProcessID() != first {
		t.Fatal("ProcessID is zero or not stable")
	}
}
