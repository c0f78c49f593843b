package node

import (
	"time"

	"codeberg.org/snowflaked/snowflaked/internal/zkconn/zkmem"
)

// A node key moved to a new machine while its old process is cut off from
// ZooKeeper (docs/fencing.md, S1 and S2: "same-key take-over of a
// partitioned node"): the old process keeps its disk, its clock and its
// HTTP port, and issues what its acknowledged fences allow; the new one, on
// an empty disk, claims the same worker ID once the old session expired and
// must start after the old holder's fence (S2); once the cut ends, the old
// process's renewals must fail on the version (S1) and it must issue
// nothing more. The simulation sends batches to both.

// migrateEvery: about one step in migrateEvery moves a node key (drawn
// apart from the step mix, so the other draws of a seed stay as they were
// until the first move).
const migrateEvery = 150

// migrate moves n's node key to a new machine: its process is cut off from
// ZooKeeper for cut and stays, stranded, beside the new one.
func (s *snowSim) migrate(n *snowNode, cut time.Duration) {
	old := n.proc
	until := time.Now().Add(cut)
	s.cutOff(&old.zk, until)
	s.stranded = append(s.stranded, &snowNode{slot: n.slot, key: n.key, disk: n.disk, clock: n.clock, proc: old, procs: n.procs})
	s.slots++
	n.slot, n.disk, n.proc = s.slots, s.newDisk(), nil
	s.logf("%s: cut off from ZooKeeper for %v; its node key moves to a new machine", old.name, cut)
	s.start(n)
}

// cutOff drops every request of c's sessions, present and opened later,
// until until: a dropped request takes the connection down till then, so
// the sessions expire.
func (s *simZK) cutOff(c *simClients, until time.Time) {
	c.mu.Lock()
	c.cutTill, c.cutBy = until, s
	conns := c.conns
	c.mu.Unlock()
	for _, conn := range conns {
		s.cutSession(conn, until)
	}
}

func (s *simZK) cutSession(conn *zkmem.Conn, until time.Time) {
	id := conn.SessionID()
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.cut == nil {
		s.cut = map[int64]time.Time{}
	}
	s.cut[id] = until
}

// cutFault is the fate of a request of a session cut off until until.
func cutFault(until time.Time) (zkmem.Fault, bool) {
	now := time.Now()
	if !now.Before(until) {
		return zkmem.Fault{}, false
	}
	return zkmem.Fault{Kind: zkmem.Drop, Down: until.Sub(now)}, true
}

// issueStranded sends a batch to a stranded process now and then.
func (s *snowSim) issueStranded() (bool, error) {
	if len(s.stranded) == 0 || s.rng.IntN(3) != 0 {
		return false, nil
	}
	return true, s.issue(s.stranded[s.rng.IntN(len(s.stranded))])
}

// endStranded kills the stranded processes (kill -9).
func (s *snowSim) endStranded() {
	for _, n := range s.stranded {
		if n.proc != nil {
			s.kill(n, false)
		}
	}
	s.stranded = nil
}

// isStranded reports whether a stranded process runs key: then a process
// of key may find its worker ID claimed by another process.
func (s *snowSim) isStranded(key string) bool {
	for _, n := range s.stranded {
		if n.key == key && n.proc != nil {
			return true
		}
	}
	return false
}
