//go:build race

package testsupport

// RaceEnabled says whether the race detector is on: it makes sync.Pool drop
// items at random, so allocation counts are meaningless under it, and it
// slows simulations down.
const RaceEnabled = true
