//go:build mutation

package mutation

import "sync/atomic"

// enabled reports whether this build can break rules (the mutation tag).
const enabled = true

var active atomic.Pointer[Name]

// Broken reports whether name is the mutation in force.
func Broken(name Name) bool {
	p := active.Load()
	return p != nil && *p == name && name != none
}

// Set puts name in force (None: nothing) until the returned function
// restores what was in force before. One mutation at a time: tests that set
// one must not run in parallel.
func Set(name Name) (restore func()) {
	prev := active.Swap(&name)
	return func() { active.Store(prev) }
}
