//go:build !race

package proc

// Race reports whether the test binary runs with -race; Build then builds the
// binaries under test with it too.
const Race = false
