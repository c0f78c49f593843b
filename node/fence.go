package node

import (
	"codeberg.org/snowflaked/snowflaked/coordinator"
	"codeberg.org/snowflaked/snowflaked/internal/cachefile"
	"codeberg.org/snowflaked/snowflaked/internal/clock"
	"codeberg.org/snowflaked/snowflaked/internal/disk"
	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// fenceWriter writes fences to the cache file for the keeper (one write at
// a time: the keeper's). In ZooKeeper mode each write also records the
// coordinator's token and the ZooKeeper fence acknowledged for it, from one
// snapshot.
type fenceWriter struct {
	path  string
	disk  disk.Disk
	entry cachefile.Entry
	clock clock.Clock
	// status is the coordinator's (nil in standalone mode); floor is where
	// the generator stands (the start of its last issued tick, or of the
	// floor a claim raised); finalZKFence is the ZooKeeper fence a graceful
	// stop lowered to (0: none).
	status       func() coordinator.Status
	floor        func() snowflake.UnixMilli
	finalZKFence func() snowflake.UnixMilli
	beforeToken  func() // simulations only (seams.beforeToken)
}

// persist writes fence with the coordinator's token and returns the fence
// written: raised to the generator's floor read after the token. A re-claim
// raises the floor to the previous holder's fence before its new token
// shows in Status, so a file that names the new token never carries a
// fence below that floor (computed before the re-claim, it would have: a
// kill -9 then, and the restart would start from it, inside the previous
// holder's IDs).
func (w *fenceWriter) persist(fence snowflake.UnixMilli) (snowflake.UnixMilli, error) {
	if w.beforeToken != nil {
		w.beforeToken()
	}
	if w.status != nil {
		// One snapshot: the token and the fence acknowledged for it go
		// together, so the file never claims a fence for a token that was
		// not granted it.
		st := w.status()
		w.entry.ZKReported = max(w.entry.ZKReported, snowflake.UnixMilli(st.LastReport))
		if st.Token != "" {
			w.entry.Token, w.entry.ZKFence = st.Token, st.ZKFence
			if final := w.finalZKFence(); final != 0 {
				w.entry.ZKFence = min(w.entry.ZKFence, final) // graceful stop: see serve
			}
			if st.Incarnation != "" {
				w.entry.Incarnation = st.Incarnation
			}
		}
		if st.LeaseSession != "" {
			w.entry.ZKSession = st.LeaseSession
		}
		floor := w.floor()
		if mutation.Broken(mutation.FenceWriterSkipsFloor) {
			floor = 0
		}
		fence = max(fence, floor)
	}
	e := w.entry
	e.Fence, e.Updated = fence, snowflake.UnixMilliNow(w.clock)
	// w.disk writes only while this process holds the cache file's lock,
	// and fails a write during which it was lost (lockedDisk): such a fence
	// is never handed to the generator.
	return fence, cachefile.SaveTo(w.disk, w.path, e)
}
