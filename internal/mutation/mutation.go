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

// Segment mode (docs/segments.md R1..R7, set-max).
const (
	// AllocUnversioned: an allocation's set of the tag record is not
	// version-checked (Version -1), so two allocators that read the same
	// max_id both win the same range (R1).
	AllocUnversioned Name = "r1-alloc-unversioned"
	// IssueAboveMark: a Take hands out IDs the state file's mark has not
	// passed yet (min(permitted, held) becomes held) (R2).
	IssueAboveMark Name = "r2-issue-above-mark"
	// ReturnBeforeFileWrite: a clean stop returns its ranges without
	// first writing the state file without them (R3).
	ReturnBeforeFileWrite Name = "r3-return-before-file-write"
	// StateFileOfOtherZooKeeper: a state file of another cluster
	// incarnation (a rebuilt ZooKeeper) is resumed, not dropped (R4).
	StateFileOfOtherZooKeeper Name = "r4-state-file-of-other-zookeeper"
	// ReturnRetriedBlindly: a return whose answer was lost is made again
	// without reading back whether it landed (R5).
	ReturnRetriedBlindly Name = "r5-return-retried-blindly"
	// WentBackUnchecked: a store takes a tag record whose max_id is below
	// one it saw before as it is (see() never refuses) (R6).
	WentBackUnchecked Name = "r6-went-back-unchecked"
	// DeleteUnpolled: the poll of a served tag never reports its delete
	// (WatchTag ignores a gone incarnation) (R7).
	DeleteUnpolled Name = "r7-delete-unpolled"
	// SetMaxUnversioned: set-max's write of the tag record is not
	// version-checked, so it can lower a max_id an allocation raised
	// since it read the record (set-max).
	SetMaxUnversioned Name = "setmax-unversioned"
)

// Segment mode: a forgotten take (docs/segments.md R6).
const (
	// TakeUnrecorded: a take of a returned range deletes it with a plain
	// delete, without writing the tag record, so a ZooKeeper that forgets
	// the take puts the range back unseen (R6).
	TakeUnrecorded Name = "r6-take-unrecorded"
)
