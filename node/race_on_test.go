//go:build race

package node

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts of the server's pooled paths are meaningless under it.
const raceEnabled = true
