//go:build race

package metrics

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts of code that uses pools are meaningless under it.
const raceEnabled = true
