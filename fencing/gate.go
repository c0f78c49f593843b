package fencing

import (
	"math"
	"sync"

	"codeberg.org/snowflaked/snowflaked/internal/mutation"
	"codeberg.org/snowflaked/snowflaked/snowflake"
)

// Generator is the part of *snowflake.Generator the Gate drives.
type Generator interface {
	SetFence(fence snowflake.UnixMilli)
	RaiseFloor(floor snowflake.UnixMilli) error
	LastIssued() snowflake.UnixMilli
}

// Gate holds a generator to the lower of two fences: the local fence the
// node persisted and, in ZooKeeper mode, the fence ZooKeeper acknowledged
// for this process's token. Both only grow while the node serves, so the
// generator's fence never drops below an ID it issued. It is the fence
// keeper's FenceSetter and the coordinator's Fencer.
type Gate struct {
	gen Generator

	mu        sync.Mutex
	local, zk snowflake.UnixMilli // zk is NoZKFence without ZooKeeper
	frozen    bool
}

// NoZKFence is the ZooKeeper fence of a node without ZooKeeper (standalone).
const NoZKFence = snowflake.NoFence

// NewGate returns a gate whose ZooKeeper fence starts at zk (NoZKFence for
// none) and whose local fence is unset, so the generator
// issues nothing until the first SetFence.
func NewGate(gen Generator, zk snowflake.UnixMilli) *Gate {
	g := &Gate{gen: gen, zk: zk}
	g.apply()
	return g
}

// apply hands min(local, zk) to the generator; mu is held (or the gate is
// not shared yet).
func (g *Gate) apply() {
	if !g.frozen {
		fence := min(g.local, g.zk)
		if mutation.Broken(mutation.BorrowPastFence) && fence < math.MaxInt64-2000 {
			fence += 2000
		}
		g.gen.SetFence(fence)
	}
}

// SetFence records a local fence that was persisted.
func (g *Gate) SetFence(local snowflake.UnixMilli) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.local = max(g.local, local)
	g.apply()
}

// SetZKFence records a fence ZooKeeper acknowledged for this process.
func (g *Gate) SetZKFence(zk snowflake.UnixMilli) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.zk == NoZKFence {
		return
	}
	g.zk = max(g.zk, zk)
	g.apply()
}

// zkFence returns the ZooKeeper fence the generator is held to (NoZKFence
// without ZooKeeper).
func (g *Gate) zkFence() snowflake.UnixMilli {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.zk
}

// RaiseFloor makes every later ID come after fence: called before a new
// token's fence is handed over with SetZKFence.
func (g *Gate) RaiseFloor(fence snowflake.UnixMilli) error { return g.gen.RaiseFloor(fence) }

// LastIssued is the start of the last issued tick.
func (g *Gate) LastIssued() snowflake.UnixMilli { return g.gen.LastIssued() }

// Freeze stops the generator at its last issued tick, for a graceful stop,
// and returns that time; later SetFence and SetZKFence calls no
// longer move it.
func (g *Gate) Freeze() snowflake.UnixMilli {
	g.mu.Lock()
	defer g.mu.Unlock()
	last := g.gen.LastIssued()
	g.frozen = true
	g.gen.SetFence(last)
	return last
}
