// Package clocktest provides a manually driven clock.Clock for tests.
package clocktest

import (
	"sync"
	"time"
)

// Fake is a clock.Clock whose wall and monotonic readings move only when the
// test says so. It is safe for concurrent use.
type Fake struct {
	mu   sync.Mutex
	wall int64
	mono time.Duration
	// autoStep, when non-zero, advances both clocks by that much on every
	// WallNanos call, so code that spins waiting for time to pass makes progress.
	autoStep time.Duration
}

// NewFake returns a fake clock whose wall time is start.
func NewFake(start time.Time) *Fake { return &Fake{wall: start.UnixNano()} }

// WallNanos returns the fake wall time.
func (f *Fake) WallNanos() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.wall
	if f.autoStep != 0 {
		f.wall += int64(f.autoStep)
		f.mono += f.autoStep
	}
	return w
}

// Mono returns the fake monotonic time.
func (f *Fake) Mono() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mono
}

// Advance moves wall and monotonic time forward by d, as real time passing does.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall += int64(d)
	f.mono += d
}

// StepWall moves only the wall clock by d (negative for a rollback), as an
// NTP step or an operator does.
func (f *Fake) StepWall(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall += int64(d)
}

// SetAutoStep makes every WallNanos call advance both clocks by d after
// reading (0 turns it off).
func (f *Fake) SetAutoStep(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.autoStep = d
}
