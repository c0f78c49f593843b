//go:build chaos

package chaos

import (
	"math/rand/v2"
	"testing"
	"time"

	"codeberg.org/snowflaked/snowflaked/tests/zkharness"
)

// leaderFault kills a ZooKeeper ensemble's leader and starts it again later,
// one server down at a time: the ZooKeeper fault of the overlapping
// schedules.
type leaderFault struct {
	t    *testing.T
	ens  *zkharness.Cluster
	down *zkharness.Server
	upAt time.Time
}

// isDown reports whether a killed server waits for its restart.
func (f *leaderFault) isDown() bool { return f.down != nil }

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
