//go:build chaos

package chaos

import (
	"math/rand/v2"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// zkSettle is how long a restarted ZooKeeper server must have served
// (synced with the leader, following) before the next leader kill: time
// for it to write what it synced to disk.
const zkSettle = 3 * time.Second

// leaderFault kills a ZooKeeper ensemble's leader and starts it again later,
// one server in trouble at a time: the ZooKeeper fault of the overlapping
// schedules. A server counts as in trouble from its kill until it has served
// again for zkSettle after its restart, not only until its process starts: a
// leader killed while a restarted follower was still syncing is two faults
// at once, more than three servers tolerate. ZooKeeper 3.8.0 (Debian's) was
// seen to lose committed writes then: a follower acknowledges the sync
// before its disk has it (ZOOKEEPER-4643/4646, fixed in later releases), is
// elected and killed, and comes back with an empty database; the next
// quorum's leader was a stale server, the tag's max_id went back and dense
// IDs were handed out twice (CHAOS_SEED=1795453555942714644, with a CPU hog
// beside the run). No client can guard against a coordinator that forgets
// acknowledged writes; the schedule stays within what ZooKeeper promises.
type leaderFault struct {
	t    *testing.T
	ens  *zkharness.Cluster
	down *zkharness.Server
	upAt time.Time
	// settling was restarted and has not served for zkSettle yet
	// (settledAt is zero until it first serves).
	settling  *zkharness.Server
	settledAt time.Time
}

// isDown reports whether the ensemble is not whole: a killed server waits
// for its restart, or a restarted one has not served for zkSettle yet.
func (f *leaderFault) isDown() bool {
	switch {
	case f.down != nil:
		return true
	case f.settling == nil:
		return false
	case f.settledAt.IsZero():
		if _, err := f.settling.Mode(); err == nil {
			f.settledAt = time.Now().Add(zkSettle)
		}
		return true
	case time.Now().Before(f.settledAt):
		return true
	}
	f.settling = nil
	return false
}

// kill kills the leader, to be started again 0.5s-4s later (drawn from rng
// after the kill, so that a schedule replays). It reports false, drawing
// nothing, when no leader is known: an election is under way.
func (f *leaderFault) kill(rng *rand.Rand) bool {
	f.t.Helper()
	leader, err := f.ens.Leader()
	if err != nil {
		return false
	}
	if err := leader.Kill(); err != nil {
		f.t.Fatal(err)
	}
	f.down, f.upAt = leader, time.Now().Add(time.Duration(500+rng.IntN(3500))*time.Millisecond)
	return true
}

// restartDue starts the killed server once its time has come and reports
// whether it did.
func (f *leaderFault) restartDue() bool {
	f.t.Helper()
	if f.down == nil || time.Now().Before(f.upAt) {
		return false
	}
	f.end()
	return true
}

// end starts the killed server now, if there is one.
func (f *leaderFault) end() {
	f.t.Helper()
	if f.down == nil {
		return
	}
	if err := f.down.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.settling, f.settledAt = f.down, time.Time{}
	f.down = nil
}

// pending counts the nodes down and waiting for their restart (a non-zero
// restart time).
func pending(restartAt []time.Time) int {
	n := 0
	for _, at := range restartAt {
		if !at.IsZero() {
			n++
		}
	}
	return n
}
