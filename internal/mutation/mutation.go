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
	// none breaks nothing.
	none Name = ""
)

// Segment mode (docs/segments.md R1..R9, set-max).
const (
	// AllocUnversioned: an allocation's set of the tag record is not
	// version-checked (Version -1), so two allocators that read the same
	// max_id both win the same range (R1).
	AllocUnversioned Name = "r1-alloc-unversioned"
	// PeriodStartedTwice: a node starting a reset tag's period that the
	// record has already writes its base again, at the current max_id, so
	// the period's numbers start over (R9).
	PeriodStartedTwice Name = "r9-period-started-twice"
	// RepairForgetsPeriods: the repair of a reset tag's record that went
	// back (set-max --drop-returned) leaves no restart base, so a period
	// whose start ZooKeeper forgot starts again at the new max_id and
	// numbers from the start again (R9).
	RepairForgetsPeriods Name = "r9-repair-forgets-periods"
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
	// CorrectionIsAJump: the jump guard's trusted trajectory H (clockguard/jump.go)
	// follows a step back, so the correction that undoes it is judged by
	// its size and held as a jump.
	CorrectionIsAJump Name = "correction-held-as-jump"
)

// Recycling at scale (docs/fencing.md, "Reaping dead forever znodes";
// docs/operations.md, "Worker-ID recycling").
const (
	// RecycleEvictUnversioned: the take-over of a worker ID (recycleOps,
	// coordinator/claim.go) sets the evicted owners' znodes without a
	// version, so two recyclers of one ID no longer serialize on them.
	RecycleEvictUnversioned Name = "recycle-evict-unversioned"
	// RecycleNamedUnmarked: the take-over of a worker ID some forever znode
	// names (recycleOps, coordinator/claim.go) leaves forever/ alone, so a
	// recycler whose scan it fell inside sees that ID named by nobody and
	// takes it again.
	RecycleNamedUnmarked Name = "recycle-named-unmarked"
	// ReapHolders: reaping after a take-over (reapable, coordinator/reap.go)
	// also deletes silent znodes that still hold a worker ID, and their
	// fences with them.
	ReapHolders Name = "reap-holders"
)

// A cluster deleted and created again (docs/fencing.md, "Deleting a
// cluster").
const (
	// TombstoneFloorSkipped: a cluster created over a tombstone creates its
	// forever znodes with no fence and claims start after the previous
	// holder's fence alone (findOrCreateForever and Claim,
	// coordinator/claim.go), as if the deleted cluster never was.
	TombstoneFloorSkipped Name = "tombstone-floor-skipped"
	// TagTombstoneIgnored: segment create reads no tombstone (overTombstone,
	// segment/tombstone.go), so a tag created again under a deleted one's
	// name starts where the operator says, below the numbers it issued
	// (R8).
	TagTombstoneIgnored Name = "r8-tag-tombstone-ignored"
	// TokenStaleUnbounded: a store that cannot read a token tag's hashes
	// serves the ones it read last however old they are (ZKStore.Tokens,
	// segment/zktokens.go): a token rotated out during a partition is
	// honoured for as long as it lasts.
	TokenStaleUnbounded Name = "token-stale-unbounded"
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

// The fence rules of package fencing that the model simulation
// (fencing/sim_test.go) drives: the functions the coordinator and the node
// call.
const (
	// S2ClaimForgetsFence: fencing.Claim writes no previous fence, so the
	// new holder starts after 0 instead of after every earlier holder's
	// acknowledged fences (S2).
	S2ClaimForgetsFence Name = "s2-claim-forgets-fence"
	// S3CacheAnyToken: fencing.StartAfter trusts a matching cache file's
	// fence whatever its token, though another process may have claimed
	// the worker ID since (S3).
	S3CacheAnyToken Name = "s3-cache-trusted-any-token"
)

// The fence rules no random schedule reached: a renewal's version check
// (S1), the order of a graceful stop's two final writes (S2), the local
// fence persisted before the generator may use it (L1). The targeted
// scenarios of node/simrules_test.go catch them.
const (
	// S1RenewalUnversioned: a renewal's set of the forever znode
	// (Coordinator.renew, coordinator/run.go) is sent with version -1, so
	// a renewal applied after another process's claim succeeds (S1).
	S1RenewalUnversioned Name = "s1-renewal-unversioned"
	// S2StopLowersZooKeeperFirst: a graceful stop (node.serve) lowers
	// ZooKeeper's fence to the last issued tick before the cache file's
	// copy of it (S2, graceful stop).
	S2StopLowersZooKeeperFirst Name = "s2-stop-lowers-zookeeper-first"
	// L1FenceBeforePersist: the fence keeper (fencing.Keeper) hands a new
	// local fence to the generator before its write reaches the disk (L1).
	L1FenceBeforePersist Name = "l1-fence-before-persist"
)
