package node

import (
	"math"
	"sync"

	"snowflaked/snowflake"
)

// fenceGate gives the generator the lower of the two fences (SPEC §3): the
// local fence the keeper persisted and, in ZooKeeper mode, the fence
// ZooKeeper acknowledged for this process's token. Both only grow while the
// node serves, so the generator's fence never drops below an ID it issued.
// It is the keeper's FenceSetter and the coordinator's Fencer.
type fenceGate struct {
	gen *snowflake.Generator

	mu        sync.Mutex
	local, zk int64 // Unix ms; zk is math.MaxInt64 in standalone mode
}

// newFenceGate returns a gate whose ZooKeeper fence starts at zk (Unix ms;
// math.MaxInt64 for none) and whose local fence is unset (nothing issued
// until the keeper's first write).
func newFenceGate(gen *snowflake.Generator, zk int64) *fenceGate {
	g := &fenceGate{gen: gen, zk: zk}
	g.apply()
	return g
}

// apply hands min(local, zk) to the generator; mu is held (or the gate is
// not shared yet).
func (g *fenceGate) apply() { g.gen.SetFence(min(g.local, g.zk)) }

// SetFence records a local fence the keeper has persisted.
func (g *fenceGate) SetFence(local int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.local = max(g.local, local)
	g.apply()
}

// SetZKFence records a fence ZooKeeper acknowledged for this process.
func (g *fenceGate) SetZKFence(zk int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.zk == math.MaxInt64 {
		return // standalone: no ZooKeeper fence
	}
	g.zk = max(g.zk, zk)
	g.apply()
}

// ZKFence returns the ZooKeeper fence the generator is held to (Unix ms;
// math.MaxInt64 in standalone mode).
func (g *fenceGate) ZKFence() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.zk
}

// RaiseFloor makes every later ID come after fence (Unix ms).
func (g *fenceGate) RaiseFloor(fence int64) error { return g.gen.RaiseFloor(fence) }

// LastIssued is the start of the last issued tick (Unix ms).
func (g *fenceGate) LastIssued() int64 { return g.gen.LastUnixMilli() }

// freeze stops the generator at its last issued tick for a graceful stop
// and returns that time (Unix ms); the fences no longer move it.
func (g *fenceGate) freeze() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	last := g.gen.LastUnixMilli()
	g.local, g.zk = last, min(g.zk, last)
	g.gen.SetFence(last)
	return last
}
