//go:build race

package node

// raceEnabled: the race detector is on (simulations run fewer seeds).
const raceEnabled = true
