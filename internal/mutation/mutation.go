// Package mutation breaks one safety rule on purpose, so that a test can
// show the simulations catch it. Each Name is one rule of docs/fencing.md or
// docs/segments.md and the one-line change that breaks it; the shipped code
// asks Broken(name) at the line the rule lives on.
//
// Only a build with the mutation tag can break anything: without it Broken
// is a constant false the compiler removes, and the production binary
// carries no mutation. The table of mutations, the simulation and seed that
// catch each and the command that reproduces it are in docs/testing.md.
package mutation

// Name names one mutation: the rule it breaks and how.
type Name string

// The mutations. Each comment is the one-line change.
const (
	// None breaks nothing.
	None Name = ""
)
