// Package ctxlock is a mutex for critical sections that wait on I/O (a
// ZooKeeper round, a disk write that may hang): waiting for it can be given
// up with a context, and the waiters block on a channel, which a
// testing/synctest bubble counts as durably blocked (a sync.Mutex it does
// not, so a simulation whose holder waits on virtual time would stall).
package ctxlock

import "context"

// Mutex is a context-aware mutex. Its zero value is not usable: call New.
type Mutex chan struct{}

// New returns an unlocked Mutex.
func New() Mutex { return make(Mutex, 1) }

// Lock locks m, waiting as long as it takes.
func (m Mutex) Lock() { m <- struct{}{} }

// LockCtx locks m unless ctx ends first (then it returns ctx's error and m
// is not locked).
func (m Mutex) LockCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil { // an ended context wins over a free lock (select picks at random)
		return err
	}
	select {
	case m <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock unlocks m.
func (m Mutex) Unlock() { <-m }
