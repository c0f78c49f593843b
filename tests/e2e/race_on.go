//go:build race

package e2e

// raceEnabled: the test binary runs with -race, so the binaries under test
// are built with it too.
const raceEnabled = true
