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

// The paths the node simulation reaches beyond the plain claim: the
// re-claim after a stale cache token (S4), retiring a dead node, the
// worker-ID range, a correction of a clock step back.
const (
	// ReclaimSkipsFloor: completeReclaim (coordinator/run.go) raises the
	// generator's floor to 0 instead of the previous holder's fence.
	ReclaimSkipsFloor Name = "s4-reclaim-skips-floor"
	// FenceWriterSkipsFloor: fenceWriter.persist (node/fence.go) writes the
	// keeper's figure without raising it to the floor read after the token.
	FenceWriterSkipsFloor Name = "s4-fence-writer-skips-floor"
	// RetiredFenceDropped: the take-over of a worker ID (recycleOps,
	// coordinator/claim.go) leaves a retired holder's fence out of F0.
	RetiredFenceDropped Name = "retire-fence-dropped"
	// RangeIgnored: the recycler's scan of free worker IDs (scan.free,
	// coordinator/claim.go) starts at 0 instead of the range's LO.
	RangeIgnored Name = "range-recycle-outside"
	// CorrectionIsAJump: the jump guard's trusted trajectory H (node/jump.go)
	// follows a step back, so the correction that undoes it is judged by
	// its size and held as a jump.
	CorrectionIsAJump Name = "correction-held-as-jump"
)
