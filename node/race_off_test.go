//go:build !race

package node

// raceEnabled: see race_on_test.go.
const raceEnabled = false
