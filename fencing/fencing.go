// Package fencing is the safety path of snowflake IDs, in the order a
// process meets it (docs/fencing.md writes the argument out):
//
//   - fencing.go: the rules — what a claim writes, how far a renewal moves
//     the ZooKeeper fence, when a conflicting write is still one's own, and
//     where a new process starts (StartAfter);
//   - startwait.go: StartWait holds a new process out of service until its
//     clock is past the fence it must start after;
//   - gate.go: Gate holds the generator to the lower of the local fence and
//     the ZooKeeper fence acknowledged to this process;
//   - keeper.go: Keeper writes the local fence ahead of the clock, durably,
//     before the generator may use it.
//
// The coordinator (claim and renewals) and the node (wiring) apply these;
// the simulation in this package drives the rules, with the real
// generator, against an in-memory ZooKeeper under seeded faults.
package fencing

import (
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Record is the fencing part of a worker ID's forever znode: the instance
// token of the process that last claimed it, the fence
// ZooKeeper acknowledged last, and what the claim replaced.
type Record struct {
	Token     string
	Fence     snowflake.UnixMilli
	PrevToken string
	PrevFence snowflake.UnixMilli
}

// Claim is the record a claim by token writes over prev at now, with the
// fence lead g: the previous token and fence are kept, so the new
// holder issues only after PrevFence, and the fence never goes down.
func Claim(prev Record, token string, now snowflake.UnixMilli, g time.Duration) Record {
	r := Record{Token: token, Fence: max(prev.Fence, now.Add(g)), PrevToken: prev.Token, PrevFence: prev.Fence}
	if mutation.Broken(mutation.S2ClaimForgetsFence) {
		r.PrevFence = 0
	}
	return r
}

// Renew is the fence a renewal at now writes: now + g, never below the fence
// already acknowledged (a clock that went back must not shrink the promise).
func Renew(acked, now snowflake.UnixMilli, g time.Duration) snowflake.UnixMilli {
	return max(acked, now.Add(g))
}

// Adopt reports whether a forever znode read after a version conflict still
// belongs to this process: same worker ID and its own token (a write of its
// own whose answer was lost). Anything else is a take-over.
func Adopt(readWorker, ownWorker int64, readToken, ownToken string) bool {
	return ownToken != "" && readWorker == ownWorker && readToken == ownToken
}

// Cache is what the node's cache file says, for StartAfter.
type Cache struct {
	// Matches: the file holds this cluster (incarnation), node key and the
	// claimed worker ID.
	Matches bool
	// Token the file recorded ("" for a file from before tokens).
	Token string
	// Fence is the file's local fence: nothing its process issued is
	// beyond it.
	Fence snowflake.UnixMilli
}

// StartAfter is the fence a process that made claim must start after: the
// cache file's fence when the claim replaced the cache file's own token
// (nobody claimed the worker ID since that process, whose IDs the file's
// fence bounds), else the previous holder's fence — the larger of both for a
// matching file without a token. fromCache says which one won.
func StartAfter(claim Record, c Cache) (fence snowflake.UnixMilli, fromCache bool) {
	switch {
	case mutation.Broken(mutation.L2RestartIgnoresFence):
		return 0, false
	case !c.Matches:
		return claim.PrevFence, false
	case mutation.Broken(mutation.S3CacheAnyToken):
		return c.Fence, true
	case c.Token != "" && c.Token == claim.PrevToken:
		return c.Fence, true
	case c.Fence > claim.PrevFence:
		return c.Fence, true
	}
	return claim.PrevFence, false
}
