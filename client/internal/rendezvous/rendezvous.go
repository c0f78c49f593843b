// Package rendezvous picks the nodes a client talks to by rendezvous
// (highest-random-weight) hashing: each client ranks the nodes by a weight
// that depends on the client's ID and the node's key, and talks to the
// first k. The one function behind the client's subset, whether the keys
// are addresses (a static list, Bootstrap) or worker IDs (zkdiscovery).
//
// Two properties follow, and are what the client counts on: over many
// clients every node is in about k/n of the subsets (balance), and a node
// that leaves moves only the clients that had it, each to the node it
// ranked next (minimal movement); a node that joins takes only the places
// where it ranks among the first k.
//
// Weights are a pure function of (client ID, key), the same in every
// process and on every platform; only the client ID is random.
package rendezvous

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
)

// processID is the process's random client ID, drawn once.
var processID = sync.OnceValue(func() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
})

// ProcessID is a random, non-zero client ID drawn once per process: the
// ID of every client of the process that was given none.
func ProcessID() uint64 { return processID() }

// Weight is key's weight for client id: a 64-bit hash of both (FNV-1a of
// the key, mixed with the ID by SplitMix64's finalizer).
func Weight(id uint64, key string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := range len(key) {
		h ^= uint64(key[i])
		h *= prime
	}
	return mix(h ^ mix(id+0x9e3779b97f4a7c15))
}

// mix is SplitMix64's finalizer: a bijection on 64 bits in which every
// input bit flips each output bit with probability about 1/2.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Rank returns the indices of keys from the highest weight for client id
// to the lowest; equal weights (equal keys) keep the keys' order.
func Rank(id uint64, keys []string) []int {
	w := make([]uint64, len(keys))
	idx := make([]int, len(keys))
	for i, k := range keys {
		w[i], idx[i] = Weight(id, k), i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(w[b], w[a]) })
	return idx
}

// Top returns the indices of the k keys of highest weight for client id,
// highest first: all of them, ranked, when k >= len(keys).
func Top(id uint64, keys []string, k int) []int {
	r := Rank(id, keys)
	return r[:min(max(k, 0), len(r))]
}
