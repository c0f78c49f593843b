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

// The fencing rules of docs/fencing.md on the snowflake simulation's paths
// (renewals, restarts, borrowing).
const (
	// S1AdoptAnyWrite: a renewal whose version conflicted adopts whatever
	// the znode now carries as its own write (any worker ID, any token).
	S1AdoptAnyWrite Name = "s1-adopt-any-write"
	// L2RestartIgnoresFence: a restart starts from no fence, not after the
	// cache file's or the previous holder's (fencing.StartAfter).
	L2RestartIgnoresFence Name = "l2-restart-ignores-fence"
	// BorrowPastFence: the generator gets every local fence 2s further than
	// the persisted one, so borrowing runs past it.
	BorrowPastFence Name = "borrow-past-fence"
)
