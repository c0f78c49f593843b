package coordinator

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/internal/zkclient"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// reapPerRecycle bounds the dead forever znodes one take-over deletes: each
// take-over leaves at most one more (the owner it evicted), so the forever
// znodes stay bounded by the live ones plus the recently dead, at O(1)
// extra requests per take-over.
const reapPerRecycle = 4

// reap deletes, after a take-over, up to reapPerRecycle dead forever znodes
// the take-over's scan s found: znodes that hold no worker ID (evicted by a
// take-over, or never given one) and were last written more than
// recycleAfter before now, oldest first, each at the version scanned (a
// znode written since is left alone). Such a znode holds no fence a later
// holder must start after: an evicted owner's fence (the higher of its
// fence and last_ts) became its evictor's prev_fence in the take-over's
// multi, and its version changed there, so its process can renew nothing
// after it; a znode never given an ID never issued one. mine (this node's
// own znode) is never reaped. Failures are logged and ignored: reaping is
// housekeeping, and the next take-over tries again.
func (c *Coordinator) reap(ctx context.Context, z zkclient.Client, s *scan, mine string, now snowflake.UnixMilli, recycleAfter time.Duration) {
	cutoff := now.Add(-recycleAfter)
	var dead []*foreverNode
	for _, n := range s.byPath {
		if n.path != mine && reapable(n, cutoff) && !slices.Contains(s.malformed, n.path) {
			dead = append(dead, n)
		}
	}
	slices.SortFunc(dead, func(a, b *foreverNode) int {
		if d := a.lastSeen() - b.lastSeen(); d != 0 {
			return int(max(min(d, 1), -1))
		}
		return int(a.seq - b.seq)
	})
	for _, n := range dead[:min(len(dead), reapPerRecycle)] {
		err := z.Delete(ctx, n.path, n.version)
		switch {
		case err == nil:
			c.log.Info().Str("forever", n.path).Str("node_key", n.key).Str("recycled_to", n.data.RecycledTo).
				Int64("last_seen", int64(n.lastSeen())).Msg("reaped a dead forever znode (it holds no worker ID, and its fence went to its worker ID's next holder)")
		case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		default:
			c.log.Debug().Err(err).Str("forever", n.path).Msg("reaping a dead forever znode failed; a later take-over tries again")
		}
	}
}

// reapable reports whether forever znode n may be deleted: it holds no
// worker ID, its data decoded, and it was last written before cutoff (unix
// ms).
func reapable(n *foreverNode, cutoff snowflake.UnixMilli) bool {
	holds := n.workerID != noWorker
	if mutation.Broken(mutation.ReapHolders) {
		holds = false
	}
	return !holds && n.data.NodeKey != "" && n.lastSeen() < cutoff
}
